package arrays

import (
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// fakeTx is a transaction: its time and its batch.
type fakeTx struct {
	now   time.Time
	batch store.Batch
	dirty []*api.Job // the jobs it changed
}

func (tx *fakeTx) Now() time.Time      { return tx.now }
func (tx *fakeTx) Batch() *store.Batch { return &tx.batch }

// fakeJobs is the orchestrator's books as the feature reads them (Jobs).
type fakeJobs struct {
	queued   int
	queuedBy map[string]int
	jobs     []*api.Job // live, in id order
	forgot   []Done
}

func (f *fakeJobs) Queued() int              { return f.queued }
func (f *fakeJobs) QueuedBy(user string) int { return f.queuedBy[user] }

func (f *fakeJobs) All() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, j := range f.jobs {
			if !yield(j) {
				return
			}
		}
	}
}

func (f *fakeJobs) Changed(tx feature.Tx) map[string]*api.Job {
	m := map[string]*api.Job{}
	for _, j := range tx.(*fakeTx).dirty {
		m[j.ID] = j
	}
	return m
}

func (f *fakeJobs) EndedRow(j *api.Job, at time.Time) store.EndedJob {
	return store.EndedJob{User: j.User, State: j.State, FinishedAt: at}
}

func (f *fakeJobs) Forget(_ feature.Tx, done []Done) { f.forgot = append(f.forgot, done...) }

// submit adds array id of expr's tasks to b, as the orchestrator does:
// the tasks join fake's live jobs.
func submit(b *Books, f *fakeJobs, id, expr string) (*fakeTx, []*api.Job) {
	spec, err := b.Spec(&api.SubmitRequest{Array: expr})
	if err != nil {
		panic(err)
	}
	tx := &fakeTx{now: t0}
	tmpl := api.Job{User: "ana", Command: "x", GPUCount: 1, Nodes: 1, Priority: api.PriorityNormal, SubmittedAt: t0}
	tasks := b.Add(tx, id, &tmpl, spec, expr)
	f.jobs = append(f.jobs, tasks...)
	return tx, tasks
}

// move moves j to state to, as a transition does, and notes it changed
// in tx.
func move(b *Books, tx *fakeTx, j *api.Job, to api.State) {
	e := api.Event{At: tx.now, From: j.State, To: to}
	j.State = to
	tx.dirty = append(tx.dirty, j)
	b.Moved(tx, j, e)
}
