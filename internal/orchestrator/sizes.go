package orchestrator

import (
	"fmt"
	"net/http"

	"github.com/corral-sched/corral/internal/api"
)

// Bounded memory (issue 24): a job's command and env are held in memory
// while it is queued or running, copied into every view of it and every
// page that lists it. One user within the count limits submitted 400 jobs
// of about 1 MB each (the server went from 0.4 to 1.1 GB) and three
// listings of them took it to 6.3 GB. So a job's command and env are
// bounded in bytes, and so are the stored bytes of one user's jobs that
// have not ended; listings page by bytes as well as by count
// (jobs_page.go, queue_page.go).

// Defaults of the size limits (docs/security.md).
const (
	DefaultMaxCommandBytes    = 64 << 10  // a job's command
	DefaultMaxEnvBytes        = 256 << 10 // a job's env: names and values together
	DefaultMaxUserQueuedBytes = 64 << 20  // stored bytes of one user's jobs not ended
)

// jobBytes is what a job's own text costs in memory and in every listing
// of it: its command, env, name, workdir, labels and dependencies (an
// array's tasks share their array's, which counts them once).
func jobBytes(j *api.Job) int64 {
	n := len(j.Command) + len(j.Name) + len(j.Workdir) + len(j.DependsOn) + len(j.User) + len(j.Project)
	for k, v := range j.Env {
		n += len(k) + len(v)
	}
	for k, v := range j.NodeLabels {
		n += len(k) + len(v)
	}
	return int64(n)
}

// sizeLimit is a limit of Limits: 0 means def, negative no limit.
func sizeLimit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// checkJobSize checks a valid submission's command and env against the
// per-job byte limits (422 naming the field) and, unless exempt (an
// admin), the stored bytes of the user's jobs that have not ended,
// counting this one (429 user_bytes_full; arrays count their template
// once). Loop only.
func (o *Orchestrator) checkJobSize(j *api.Job, exempt bool) error {
	l := o.cfg.Limits
	if max := sizeLimit(l.MaxCommandBytes, DefaultMaxCommandBytes); max > 0 && int64(len(j.Command)) > max {
		return api.Invalid("command", "is %d bytes; a job's command may have at most %d on this server (--max-command-bytes)", len(j.Command), max)
	}
	env := int64(0)
	for k, v := range j.Env {
		env += int64(len(k) + len(v))
	}
	if max := sizeLimit(l.MaxEnvBytes, DefaultMaxEnvBytes); max > 0 && env > max {
		return api.Invalid("env", "is %d bytes (names and values); a job's env may have at most %d on this server (--max-env-bytes)", env, max)
	}
	max := sizeLimit(l.MaxUserQueuedBytes, DefaultMaxUserQueuedBytes)
	if exempt || max <= 0 {
		return nil
	}
	if have, n := o.liveBytes[j.User], jobBytes(j); have+n > max {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "user_bytes_full",
			Message: fmt.Sprintf("%s's jobs that have not ended hold %d bytes of commands and env; with this one's %d that is past the limit of %d per user (--max-queued-bytes-per-user); try again when some have ended", j.User, have, n, max)}
	}
	return nil
}

// liveBytes is kept by addLive: per user, jobBytes of every plain job
// that has not ended and of every array in memory. Write lock held.
func (o *Orchestrator) addLive(user string, n int64) {
	if n == 0 {
		return
	}
	if o.liveBytes == nil {
		o.liveBytes = map[string]int64{}
	}
	if o.liveBytes[user] += n; o.liveBytes[user] <= 0 {
		delete(o.liveBytes, user)
	}
}

// countLive keeps liveBytes in step with a plain job's move from one
// state to another ("" for a new job). Write lock held.
func (o *Orchestrator) countLive(j *api.Job, from, to api.State) {
	if j.ArrayJobID != "" {
		return // its array counts (addLive at submission and eviction)
	}
	was, is := from != "" && !from.Terminal(), to != "" && !to.Terminal()
	switch {
	case !was && is:
		o.addLive(j.User, jobBytes(j))
	case was && !is:
		o.addLive(j.User, -jobBytes(j))
	}
}

// recountLive counts liveBytes afresh from what memory holds: after
// start-up has loaded the jobs and arrays that have not ended.
func (o *Orchestrator) recountLive() {
	o.liveBytes = map[string]int64{}
	for _, j := range o.jobs {
		if j.ArrayJobID == "" && !j.State.Terminal() {
			o.addLive(j.User, jobBytes(j))
		}
	}
	for _, a := range o.arr.byID {
		o.addLive(a.rec.User, jobBytes(&a.tmpl))
	}
}

// RecentMaxBytes is the most text (jobBytes) a job that ended keeps in
// the ring of recently ended jobs (finished.go). A larger one is kept
// there without its command, env and labels, enough for the statistics,
// log tails and dependencies that read the ring; views read it whole from
// the store. Else 4,096 jobs at the size limits would hold 1.3 GB.
const RecentMaxBytes = 4 << 10

// slimEnded is what the ring keeps of j, which has just left o.jobs: j
// itself, or a copy without its large text. Write lock held.
func (o *Orchestrator) slimEnded(j *api.Job) *api.Job {
	if jobBytes(j) <= RecentMaxBytes {
		return j
	}
	c := *j
	c.Command, c.Env, c.NodeLabels = "", nil, nil
	if o.recent.slim == nil {
		o.recent.slim = map[string]bool{}
	}
	o.recent.slim[j.ID] = true
	return &c
}
