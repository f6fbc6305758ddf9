package orchestrator

import (
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/notes"
	"github.com/corral-sched/corral/internal/jobbook"
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
type notesBooks struct {
	*jobbook.Book // Get
	o             *Orchestrator
}

func (b notesBooks) Array(id string) (*api.Array, string) {
	rec, tmpl := b.o.arr.Live(id)
	if rec == nil {
		return nil, ""
	}
	return rec, tmpl.Notify
}

func (b notesBooks) QueueWaits() iter.Seq2[time.Time, time.Time] {
	return func(yield func(time.Time, time.Time) bool) {
		for j := range b.QueuedJobs() {
			if !yield(jobbook.QueuedAt(j), time.Time{}) {
				return
			}
		}
		for j := range b.o.found().Started() {
			if j.StartedAt != nil && !j.StartedAt.IsZero() && !yield(jobbook.QueuedAt(j), *j.StartedAt) {
				return
			}
		}
	}
}

// JobEnv returns a copy of a job's env (nil when there is no such job):
// the sender cuts its values out of what it sends.
func (o *Orchestrator) JobEnv(jobID string) map[string]string {
	if j, ok := o.jobAnywhere(jobID, false); ok { // reads.go: or one that ended, from the store without the lock
		return j.Env // a copy
	}
	return nil
}
