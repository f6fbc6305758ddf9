// Package sizes bounds the memory jobs take. A job's command and env are
// held in memory while it is queued or running, copied into every view of
// it and every page that lists it. One user within the count limits
// submitted 400 jobs of about 1 MB each (the server went from 0.4 to
// 1.1 GB) and three listings of them took it to 6.3 GB. So a job's
// command and env are bounded in bytes, and so are the bytes of one
// user's jobs that have not ended; listings page by bytes as well as by
// count (the orchestrator's jobs_page.go and queue_page.go, with
// JobBytes).
//
// Books is the feature: a submit check (feature.SubmitCheck) and the
// count of each user's live bytes, kept by following jobs from state to
// state (feature.Mover). An array counts once, by its template: the
// orchestrator adds it at submission and takes it away when the array
// leaves memory (Add).
package sizes

import (
	"fmt"
	"net/http"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Defaults of the limits (docs/security.md).
const (
	DefaultMaxCommandBytes    = 64 << 10  // a job's command
	DefaultMaxEnvBytes        = 256 << 10 // a job's env: names and values together
	DefaultMaxUserQueuedBytes = 64 << 20  // bytes of one user's jobs not ended
)

// Limits are the byte limits. 0 means the default, negative no limit.
type Limits struct {
	MaxCommandBytes    int64
	MaxEnvBytes        int64
	MaxUserQueuedBytes int64 // admins are exempt
}

// JobBytes is what a job's own text costs in memory and in every listing
// of it: its command, env, name, workdir, labels and dependencies (an
// array's tasks share their array's, which counts them once).
func JobBytes(j *api.Job) int64 {
	n := len(j.Command) + len(j.Name) + len(j.Workdir) + len(j.DependsOn) + len(j.User) + len(j.Project)
	for k, v := range j.Env {
		n += len(k) + len(v)
	}
	for k, v := range j.NodeLabels {
		n += len(k) + len(v)
	}
	return int64(n)
}

// limit is one of Limits: 0 means def, negative no limit (0 returned).
func limit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Books counts each user's live bytes and checks submissions against
// the limits. Its methods are called by the orchestrator's loop only.
type Books struct {
	limits Limits
	live   map[string]int64 // per user: JobBytes of plain jobs not ended and of arrays in memory
}

// New returns empty books under the limits.
func New(l Limits) *Books { return &Books{limits: l, live: map[string]int64{}} }

// CheckSubmit refuses a job whose command or env is past its byte limit
// (422 naming the field) and, unless exempt (an admin), one that would
// take its user's jobs that have not ended past their limit, counting it
// (429 user_bytes_full; an array counts its template once).
func (b *Books) CheckSubmit(s *feature.Submission) error {
	j := s.Job
	if max := limit(b.limits.MaxCommandBytes, DefaultMaxCommandBytes); max > 0 && int64(len(j.Command)) > max {
		return api.Invalid("command", "is %d bytes; a job's command may have at most %d on this server (--max-command-bytes)", len(j.Command), max)
	}
	env := int64(0)
	for k, v := range j.Env {
		env += int64(len(k) + len(v))
	}
	if max := limit(b.limits.MaxEnvBytes, DefaultMaxEnvBytes); max > 0 && env > max {
		return api.Invalid("env", "is %d bytes (names and values); a job's env may have at most %d on this server (--max-env-bytes)", env, max)
	}
	max := limit(b.limits.MaxUserQueuedBytes, DefaultMaxUserQueuedBytes)
	if s.Exempt || max <= 0 {
		return nil
	}
	if have, n := b.live[j.User], JobBytes(j); have+n > max {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "user_bytes_full",
			Message: fmt.Sprintf("%s's jobs that have not ended hold %d bytes of commands and env; with this one's %d that is past the limit of %d per user (--max-queued-bytes-per-user); try again when some have ended", j.User, have, n, max)}
	}
	return nil
}

// Moved keeps the count in step with a plain job's move from one state
// to another (e.From "" for a new job). An array's tasks count by their
// array (Add).
func (b *Books) Moved(_ feature.Tx, j *api.Job, e api.Event) {
	if j.ArrayJobID != "" {
		return
	}
	was, is := e.From != "" && !e.From.Terminal(), e.To != "" && !e.To.Terminal()
	switch {
	case !was && is:
		b.Add(j.User, JobBytes(j))
	case was && !is:
		b.Add(j.User, -JobBytes(j))
	}
}

// Add counts n more live bytes (less, when negative) for user: an
// array's template when the array is submitted or leaves memory, and
// every live job and array when the orchestrator recovers.
func (b *Books) Add(user string, n int64) {
	if n == 0 {
		return
	}
	if b.live[user] += n; b.live[user] <= 0 {
		delete(b.live, user)
	}
}

// Live is user's count of live bytes.
func (b *Books) Live(user string) int64 { return b.live[user] }

// Reset forgets every count, before the orchestrator counts afresh what
// it has loaded.
func (b *Books) Reset() { clear(b.live) }
