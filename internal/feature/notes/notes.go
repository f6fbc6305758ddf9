// Package notes is the planning side of notifications, a feature of the
// orchestrator's loop: it turns each batch's job transitions, and the
// events noted since the last commit (time-limit and idle warnings,
// admin alerts, budgets, bookings), into outbox rows committed with the
// batch (feature.Committer), and wakes the sender once they are durable.
// The sender, its endpoints and its types are package notify's.
//
// What it reads of the orchestrator's books (a job by id, an array's
// counts, the queue wait) comes through Books; it never takes the
// orchestrator's lock, which its caller holds.
//
//	noted events ─┐
//	batch events ─┴▶ Notifier.Plan ─▶ batch.Outbox ─▶ commit ─▶ Notifier.Kick
package notes

import (
	"fmt"
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// Notifier plans the notifications of a batch (notify.Planner): it turns
// events into outbox rows, which are committed with the batch, and is
// kicked once they are durable. Plan runs with the orchestrator's write
// lock held: it must do no I/O.
type Notifier interface {
	Plan(evs []notify.Event) []store.OutboxItem
	Kick()
}

// Books is what the feature reads of the orchestrator's books. Its
// methods are called with the orchestrator's write lock held, from the
// feature's own methods only.
type Books interface {
	// Get is the job with id in memory, or nil.
	Get(id string) *api.Job
	// Array is the record of an array in memory (its counts kept live)
	// and its tasks' notify field; nil when there is none. The feature
	// only reads the record.
	Array(id string) (rec *api.Array, notify string)
	// QueueWaits yields, for each job queued now, when it was last
	// queued and a zero time; for each job in memory that started (the
	// running ones and the recently ended), when it was last queued and
	// when it started.
	QueueWaits() iter.Seq2[time.Time, time.Time]
}

// Config is what the feature is built with.
type Config struct {
	// Notify plans and sends; nil: the feature notes nothing.
	Notify Notifier
	// GPUTemp is the GPU temperature (Celsius) that raises an admin
	// alert; 0 or less: DefaultGPUTemp.
	GPUTemp int
	// QueueWait raises an admin alert when the queue wait p95 stays above
	// it for QueueWaitFor; 0: off.
	QueueWait time.Duration
}

// timeLimitWarning is the share of a time limit after which a job is
// warned.
const timeLimitWarning = 0.8

// Notes is the feature (feature.Committer). Its methods are called by the
// orchestrator's loop with its write lock held; they do no I/O. A nil
// *Notes, or one without a Notifier, notes nothing.
type Notes struct {
	books Books
	cfg   Config
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

// New returns the feature reading books.
func New(books Books, cfg Config) *Notes {
	return &Notes{books: books, cfg: cfg}
}

// On reports whether notifications are planned at all, for callers that
// would otherwise build an event for nothing.
func (n *Notes) On() bool { return n != nil && n.cfg.Notify != nil }

// Pending reports whether events were noted since the last commit: a
// commit is due to carry them even if nothing else changed.
func (n *Notes) Pending() bool { return n != nil && len(n.pending) > 0 }

// Note notes ev for the next commit.
func (n *Notes) Note(ev notify.Event) {
	if !n.On() {
		return
	}
	n.pending = append(n.pending, ev)
}

// Job notes an event about j that is no transition.
func (n *Notes) Job(j *api.Job, k notify.Kind, at time.Time) {
	if !n.On() {
		return
	}
	n.pending = append(n.pending, notify.Event{Kind: k, At: at.UTC(), Job: notify.Job(j, at)})
}

// Alert notes an admin alert about node (and gpu), or the cluster when
// node is "".
func (n *Notes) Alert(k notify.Kind, at time.Time, node string, gpu *int, format string, args ...any) {
	if !n.On() {
		return
	}
	n.pending = append(n.pending, notify.Event{Kind: k, At: at.UTC(), Alert: &notify.Alert{Node: node, GPU: gpu, Message: fmt.Sprintf(format, args...)}})
}

// TimeWarning warns a running job once per attempt when it has used
// timeLimitWarning of its time limit.
func (n *Notes) TimeWarning(j *api.Job, now time.Time) {
	if !n.On() || j.TimeLimit == nil || j.StartedAt == nil {
		return
	}
	if now.Sub(*j.StartedAt) < time.Duration(float64(j.TimeLimit.Duration())*timeLimitWarning) {
		return
	}
	if a, ok := n.warned[j.ID]; ok && a == j.RetryCount {
		return
	}
	if n.warned == nil {
		n.warned = map[string]int{}
	}
	n.warned[j.ID] = j.RetryCount
	n.Job(j, notify.JobTimeLimitWarning, now)
}

// BeforeCommit adds the outbox rows of tx's transitions, of the arrays
// whose last task they end, and of the events noted since the last
// commit, to tx's batch.
func (n *Notes) BeforeCommit(tx feature.Tx) {
	if !n.On() {
		return
	}
	b := tx.Batch()
	evs := n.pending
	n.pending = nil
	ended := map[string]bool{}
	for _, je := range b.Events {
		j := n.books.Get(je.JobID)
		if j == nil {
			continue
		}
		if ev, ok := notify.FromTransition(j, je.Event); ok {
			evs = append(evs, ev)
		}
		if je.Event.To.Terminal() {
			delete(n.warned, j.ID)
		}
		if j.ArrayJobID != "" && je.Event.To.Terminal() {
			ended[j.ArrayJobID] = true
		}
	}
	for id := range ended {
		if ev, ok := n.arraySummary(id, tx.Now()); ok {
			evs = append(evs, ev)
		}
	}
	if len(evs) > 0 {
		b.Outbox = append(b.Outbox, n.cfg.Notify.Plan(evs)...)
	}
}

// Committed tells the sender that tx's rows are durable.
func (n *Notes) Committed(tx feature.Tx) {
	if n.On() && len(tx.Batch().Outbox) > 0 {
		n.cfg.Notify.Kick()
	}
}

// arraySummary is the array.finished event of an array whose every task
// has ended (its live counts have none queued or active).
func (n *Notes) arraySummary(id string, now time.Time) (notify.Event, bool) {
	rec, when := n.books.Array(id)
	if rec == nil {
		return notify.Event{}, false
	}
	c := rec.Counts
	if c.Queued > 0 || c.Active() > 0 {
		return notify.Event{}, false
	}
	a := &notify.ArrayInfo{ID: id, Name: rec.Name, User: rec.User, Project: rec.Project,
		Completed: c.Completed, Failed: c.Failed, Canceled: c.Canceled}
	a.Tasks = a.Completed + a.Failed + a.Canceled
	if a.Tasks == 0 {
		return notify.Event{}, false
	}
	return notify.ArrayEvent(a, when, now), true
}
