package orchestrator

import (
	"context"
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/notes"
)

// Notifier plans the notifications of a batch and is kicked once they are
// durable (notes.Notifier; notify.Planner is one).
type Notifier = notes.Notifier

// DefaultAlertGPUTemp is the GPU temperature (Celsius) at or above which
// an admin alert is raised, unless Config.AlertGPUTemp says otherwise.
const DefaultAlertGPUTemp = notes.DefaultGPUTemp

// QueueWaitFor is how long the queue wait p95 must stay above
// Config.AlertQueueWait before an admin alert is raised.
const QueueWaitFor = notes.QueueWaitFor

// notesBooks is what the notifications feature (feature/notes) reads of
// the books. Its methods run with the write lock held: the feature calls
// them only from its own methods, which the loop calls with the lock.
type notesBooks struct{ o *Orchestrator }

func (b notesBooks) Job(id string) *api.Job { return b.o.jobs[id] }

func (b notesBooks) Array(id string) (*api.Array, string) {
	rec, tmpl := b.o.arr.Live(id)
	if rec == nil {
		return nil, ""
	}
	return rec, tmpl.Notify
}

func (b notesBooks) QueueWaits() iter.Seq2[time.Time, time.Time] {
	return func(yield func(time.Time, time.Time) bool) {
		for id := range b.o.q.queued {
			if !yield(queuedAt(b.o.jobs[id]), time.Time{}) {
				return
			}
		}
		for j := range b.o.startedJobs() { // finished.go
			if j.StartedAt != nil && !j.StartedAt.IsZero() && !yield(queuedAt(j), *j.StartedAt) {
				return
			}
		}
	}
}

// flushNotes commits the events noted since the last commit when nothing
// else has (scheduling stopped, no job changing). Loop only.
func (o *Orchestrator) flushNotes(ctx context.Context) {
	o.checkQueueWait(o.cfg.Now())
	o.mu.Lock()
	if !o.notes.Pending() {
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

// checkQueueWait lets the notifications feature compare the queue wait
// p95 with Config.AlertQueueWait. Loop only, no lock held.
func (o *Orchestrator) checkQueueWait(now time.Time) {
	if o.cfg.Notify == nil || o.cfg.AlertQueueWait <= 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notes.CheckQueueWait(now)
}

// JobEnv returns a copy of a job's env (nil when there is no such job):
// the sender cuts its values out of what it sends.
func (o *Orchestrator) JobEnv(jobID string) map[string]string {
	if j, ok := o.jobAnywhere(jobID, false); ok { // reads.go: or one that ended, from the store without the lock
		return j.Env // a copy
	}
	return nil
}
