package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// Notifier plans the notifications of a batch (notify.Planner): it turns
// events into outbox rows, which are committed with the batch, and is
// kicked once they are durable. Plan runs with the write lock held: it
// must do no I/O.
type Notifier interface {
	Plan(evs []notify.Event) []store.OutboxItem
	Kick()
}

// notifyState is the orchestrator's side of notifications. Loop only,
// write lock held.
type notifyState struct {
	// pending holds events noted since the last commit (warnings, alerts):
	// the next commit carries them.
	pending []notify.Event
	// warned: jobs told they used 80% of their time limit, by attempt.
	warned map[string]int
	gpus   map[string]*gpuAlerts // by node
	// queueWait: since when the queue wait p95 is over the threshold,
	// and whether that was told.
	queueWait struct {
		since time.Time
		told  bool
	}
}

// timeLimitWarning is the share of a time limit after which a job is
// warned.
const timeLimitWarning = 0.8

// noteJob notes an event about j that is no transition.
func (o *Orchestrator) noteJob(j *api.Job, k notify.Kind, at time.Time) {
	if o.cfg.Notify == nil {
		return
	}
	o.notes.pending = append(o.notes.pending, notify.Event{Kind: k, At: at.UTC(), Job: notify.Job(j, at)})
}

// noteAlert notes an admin alert.
func (o *Orchestrator) noteAlert(k notify.Kind, at time.Time, node string, gpu *int, format string, args ...any) {
	if o.cfg.Notify == nil {
		return
	}
	o.notes.pending = append(o.notes.pending, notify.Event{Kind: k, At: at.UTC(), Alert: &notify.Alert{Node: node, GPU: gpu, Message: fmt.Sprintf(format, args...)}})
}

// noteTimeWarning warns a running job once per attempt when it has used
// timeLimitWarning of its time limit.
func (o *Orchestrator) noteTimeWarning(j *api.Job, now time.Time) {
	if o.cfg.Notify == nil || j.TimeLimit == nil || j.StartedAt == nil {
		return
	}
	if now.Sub(*j.StartedAt) < time.Duration(float64(j.TimeLimit.Duration())*timeLimitWarning) {
		return
	}
	if a, ok := o.notes.warned[j.ID]; ok && a == j.RetryCount {
		return
	}
	if o.notes.warned == nil {
		o.notes.warned = map[string]int{}
	}
	o.notes.warned[j.ID] = j.RetryCount
	o.noteJob(j, notify.JobTimeLimitWarning, now)
}

// planNotifications adds the outbox rows of tx's changes (and of the
// events noted since the last commit) to its batch. Write lock held.
func (o *Orchestrator) planNotifications(tx *txn) {
	if o.cfg.Notify == nil {
		return
	}
	evs := o.notes.pending
	o.notes.pending = nil
	ended := map[string]bool{}
	for _, je := range tx.batch.Events {
		j := o.jobs[je.JobID]
		if j == nil {
			continue
		}
		if ev, ok := notify.FromTransition(j, je.Event); ok {
			evs = append(evs, ev)
		}
		if je.Event.To.Terminal() {
			delete(o.notes.warned, j.ID)
		}
		if j.ArrayJobID != "" && je.Event.To.Terminal() {
			ended[j.ArrayJobID] = true
		}
	}
	for id := range ended {
		if ev, ok := o.arraySummary(id, tx.now); ok {
			evs = append(evs, ev)
		}
	}
	if len(evs) > 0 {
		tx.batch.Outbox = append(tx.batch.Outbox, o.cfg.Notify.Plan(evs)...)
	}
}

// arraySummary is the array.finished event of an array whose every task
// has ended (its live counts, arrays.go, have none queued or active).
func (o *Orchestrator) arraySummary(id string, now time.Time) (notify.Event, bool) {
	ar := o.arr.byID[id]
	if ar == nil {
		return notify.Event{}, false
	}
	c := ar.rec.Counts
	if c.Queued > 0 || c.Active() > 0 {
		return notify.Event{}, false
	}
	a := &notify.ArrayInfo{ID: id, Name: ar.rec.Name, User: ar.rec.User, Project: ar.rec.Project,
		Completed: c.Completed, Failed: c.Failed, Canceled: c.Canceled}
	a.Tasks = a.Completed + a.Failed + a.Canceled
	if a.Tasks == 0 {
		return notify.Event{}, false
	}
	return notify.ArrayEvent(a, ar.tmpl.Notify, now), true
}

// flushNotes commits the events noted since the last commit when nothing
// else has (scheduling stopped, no job changing). Loop only.
func (o *Orchestrator) flushNotes(ctx context.Context) {
	o.checkQueueWait(o.cfg.Now())
	o.mu.Lock()
	if len(o.notes.pending) == 0 {
		o.mu.Unlock()
		return
	}
	tx := o.begin()
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("notifications not committed", "err", err)
	}
}

// kickNotifier tells the sender that tx's rows are durable.
func (o *Orchestrator) kickNotifier(tx *txn) {
	if o.cfg.Notify != nil && len(tx.batch.Outbox) > 0 {
		o.cfg.Notify.Kick()
	}
}

// maxTailBytes bounds how much of a log LogTail reads.
const maxTailBytes = 64 << 10

// LogTail returns the last n lines of an attempt's output (rank 0), for a
// failure's notification; nil when there is none. Safe from any
// goroutine (it reads only the file).
func (o *Orchestrator) LogTail(jobID string, attempt, n int) []string {
	f, err := os.Open(o.LogPath(jobID, attempt))
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-maxTailBytes, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(strings.ToValidUTF8(string(b), "?"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first may be cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = l[:300] + "…"
		}
	}
	return lines
}

// JobEnv returns a copy of a job's env (nil when there is no such job):
// the sender cuts its values out of what it sends.
func (o *Orchestrator) JobEnv(jobID string) map[string]string {
	if j, ok := o.jobAnywhere(jobID, false); ok { // reads.go: or one that ended, from the store without the lock
		return j.Env // a copy
	}
	return nil
}

// DefaultAlertGPUTemp is the GPU temperature (Celsius) at or above which
// an admin alert is raised, unless Config.AlertGPUTemp says otherwise.
const DefaultAlertGPUTemp = 90

// gpuAlerts remembers what was told about a node's GPUs, so each alert is
// raised once per episode.
type gpuAlerts struct {
	hot     map[int]bool  // GPUs told to be over temperature
	ecc     map[int]int64 // uncorrected ECC counts last told
	foreign map[int]bool  // foreign PIDs told about
}

// noteNodeReadings raises admin alerts from a node's report: a GPU over
// the temperature threshold (again after it cooled down), ECC errors that
// rose, a foreign process not seen before. Write lock held.
func (o *Orchestrator) noteNodeReadings(n *Node, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time) {
	if o.cfg.Notify == nil {
		return
	}
	if o.notes.gpus == nil {
		o.notes.gpus = map[string]*gpuAlerts{}
	}
	g := o.notes.gpus[n.ID]
	if g == nil {
		g = &gpuAlerts{hot: map[int]bool{}, ecc: map[int]int64{}, foreign: map[int]bool{}}
		o.notes.gpus[n.ID] = g
	}
	limit := o.cfg.AlertGPUTemp
	if limit <= 0 {
		limit = DefaultAlertGPUTemp
	}
	for _, r := range readings {
		idx := r.Index
		switch hot := r.Temperature != nil && *r.Temperature >= limit; {
		case hot && !g.hot[idx]:
			g.hot[idx] = true
			o.noteAlert(notify.AlertGPUTemperature, at, n.ID, &idx, "GPU %d of node %s is at %d°C (alert at %d°C)", idx, n.ID, *r.Temperature, limit)
		case !hot && r.Temperature != nil:
			delete(g.hot, idx)
		}
		if r.ECCErrors > g.ecc[idx] {
			o.noteAlert(notify.AlertGPUECC, at, n.ID, &idx, "GPU %d of node %s reports %d uncorrected ECC errors", idx, n.ID, r.ECCErrors)
		}
		g.ecc[idx] = r.ECCErrors
	}
	seen := map[int]bool{}
	for _, f := range foreign {
		seen[f.PID] = true
		if !g.foreign[f.PID] {
			gpu := f.GPU
			o.noteAlert(notify.AlertForeignProcess, at, n.ID, &gpu, "a process Corral did not start is on GPU %d of node %s: pid %d (%s, user %s); the GPU is not handed out while it runs",
				f.GPU, n.ID, f.PID, f.Name, f.User)
		}
	}
	g.foreign = seen
}

// QueueWaitFor is how long the queue wait p95 must stay above
// Config.AlertQueueWait before an admin alert is raised.
const QueueWaitFor = 15 * time.Minute

// queueWaitP95 is the p95 of the waits of the jobs started in the last 24
// hours and of the jobs queued now (their wait so far, so that a queue
// where nothing starts counts too). Lock held.
func (o *Orchestrator) queueWaitP95(now time.Time) time.Duration {
	waits := make([]float64, 0, len(o.queued))
	for id := range o.queued {
		waits = append(waits, now.Sub(queuedAt(o.jobs[id])).Seconds())
	}
	dayAgo := now.Add(-24 * time.Hour)
	for j := range o.startedJobs() { // finished.go
		if j.StartedAt != nil && !j.StartedAt.Before(dayAgo) {
			waits = append(waits, j.StartedAt.Sub(queuedAt(j)).Seconds())
		}
	}
	if len(waits) == 0 {
		return 0
	}
	slices.Sort(waits)
	return time.Duration(percentile(waits, 95) * float64(time.Second))
}

// checkQueueWait raises alert.queue_wait once the queue wait p95 has
// stayed above Config.AlertQueueWait for QueueWaitFor, and again only
// after it has dropped below. Loop only, no lock held.
func (o *Orchestrator) checkQueueWait(now time.Time) {
	if o.cfg.Notify == nil || o.cfg.AlertQueueWait <= 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p95 := o.queueWaitP95(now)
	q := &o.notes.queueWait
	if p95 <= o.cfg.AlertQueueWait {
		q.since, q.told = time.Time{}, false
		return
	}
	if q.since.IsZero() {
		q.since = now
	}
	if !q.told && now.Sub(q.since) >= QueueWaitFor {
		q.told = true
		o.noteAlert(notify.AlertQueueWait, now, "", nil, "the queue wait p95 is %s, above %s, and has been since %s",
			p95.Round(time.Second), o.cfg.AlertQueueWait, q.since.UTC().Format(time.RFC3339))
	}
}
