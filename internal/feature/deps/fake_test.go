package deps

import (
	"context"
	"io"
	"iter"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// fakeJobs is the orchestrator's books as the tracker reads them
// (Jobs, and Store through fakeStore), in memory: live jobs, the recently ended, the store's ended
// jobs and done arrays, and job numbers.
type fakeJobs struct {
	jobs     map[string]*api.Job   // live (o.jobs)
	order    []string              // submission order
	arrays   map[string][]*api.Job // arrays in memory: their tasks
	recent   map[string]*api.Job   // the ring of recently ended jobs
	stored   map[string]api.Job    // ended jobs in the store
	done     map[string][]api.Job  // done arrays in the store: their tasks
	numbers  map[int64]string
	canceled []string
	tr       *Tracker // told of the cancels it makes, as the loop's movers are
}

// fakeStore is the store as the tracker reads it (Store): the store's
// part of fakeJobs.
type fakeStore struct{ *fakeJobs }

func newFake() *fakeJobs {
	return &fakeJobs{jobs: map[string]*api.Job{}, arrays: map[string][]*api.Job{}, recent: map[string]*api.Job{},
		stored: map[string]api.Job{}, done: map[string][]api.Job{}, numbers: map[int64]string{}}
}

// tracker is a Tracker over f with the dependency timeout given.
func (f *fakeJobs) tracker(timeout time.Duration) *Tracker {
	f.tr = New(f, Config{Timeout: timeout, MinIDPrefix: 5, Store: fakeStore{f}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return f.tr
}

// add puts a live job in state s, depending on dependsOn.
func (f *fakeJobs) add(id string, s api.State, dependsOn string) *api.Job {
	j := &api.Job{ID: id, User: "ana", State: s, DependsOn: dependsOn, SubmittedAt: t0}
	f.jobs[id] = j
	f.order = append(f.order, id)
	return j
}

// task adds task i of the array id in memory, in state s.
func (f *fakeJobs) task(id string, i int, s api.State) *api.Job {
	j := f.add(id+"_"+strconv.Itoa(i), s, "")
	j.ArrayJobID, j.ArrayTaskID = id, new(i)
	f.arrays[id] = append(f.arrays[id], j)
	return j
}

// queue is the live queued jobs in submission order.
func (f *fakeJobs) queue() []*api.Job {
	var q []*api.Job
	for _, id := range f.order {
		if j := f.jobs[id]; j != nil && j.State == api.StateQueued {
			q = append(q, j)
		}
	}
	return q
}

// end moves a live job to a terminal state at time at.
func (f *fakeJobs) end(id string, s api.State, at time.Time) {
	j := f.jobs[id]
	j.State, j.FinishedAt = s, &at
}

func (f *fakeJobs) Get(id string) *api.Job { return f.jobs[id] }

func (f *fakeJobs) All() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, id := range f.order {
			if j, ok := f.jobs[id]; ok && !yield(j) {
				return
			}
		}
	}
}

func (f *fakeJobs) Active() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, id := range f.order {
			if j, ok := f.jobs[id]; ok && j.State.Active() && !yield(j) {
				return
			}
		}
	}
}

func (f *fakeJobs) IsQueued(id string) bool {
	j, ok := f.jobs[id]
	return ok && j.State == api.StateQueued
}

func (f *fakeJobs) Recent(id string) (*api.Job, bool) {
	if j, ok := f.jobs[id]; ok {
		return j, true
	}
	j, ok := f.recent[id]
	return j, ok
}

func (f fakeStore) Job(_ context.Context, id string) (api.Job, error) {
	if j, ok := f.stored[id]; ok {
		return j, nil
	}
	return api.Job{}, store.ErrNoJob
}

func (f *fakeJobs) Known(id string) bool {
	_, ok := f.Recent(id)
	_, stored := f.stored[id]
	return ok || stored
}

func (f *fakeJobs) Array(id string) ([]*api.Job, bool) {
	tasks, ok := f.arrays[id]
	return tasks, ok
}

func (f *fakeJobs) IsArray(id string) bool {
	_, mem := f.arrays[id]
	_, done := f.done[id]
	return mem || done
}

func (f fakeStore) FirstEnded(_ context.Context, id string, states ...api.State) (api.Job, error) {
	var first *api.Job
	for i, t := range f.done[id] {
		for _, s := range states {
			if t.State == s && (first == nil || finished(&t).Before(finished(first))) {
				first = &f.done[id][i]
			}
		}
	}
	if first == nil {
		return api.Job{}, store.ErrNoJob
	}
	return *first, nil
}

func (f fakeStore) DependencyIDs(_ context.Context, prefix string, limit int) ([]string, error) {
	var out []string
	for id := range f.stored {
		if strings.HasPrefix(id, prefix) && !strings.Contains(id, "_") && len(out) < limit {
			out = append(out, id)
		}
	}
	for id := range f.done {
		if strings.HasPrefix(id, prefix) && len(out) < limit {
			out = append(out, id)
		}
	}
	return out, nil
}

func (f *fakeJobs) Number(ref string) (int64, string, bool) {
	var n int64
	for _, c := range ref {
		if c < '0' || c > '9' {
			return 0, "", false
		}
		n = 10*n + int64(c-'0')
	}
	return n, f.numbers[n], true
}

func (f *fakeJobs) Cancel(tx feature.Tx, j *api.Job, reason, message string) {
	now := tx.Now()
	e := api.Event{At: now, From: j.State, To: api.StateCanceled, Reason: reason, Message: message}
	j.State, j.Reason, j.Message, j.FinishedAt = api.StateCanceled, reason, message, &now
	f.canceled = append(f.canceled, j.ID)
	f.tr.Moved(tx, j, e)
}

// fakeTx is the loop's transaction at a time.

var t0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// ids are the ids of jobs.
func ids(js []*api.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// eligible runs one pass at now and returns the ids it let through.
func eligible(t *testing.T, f *fakeJobs, now time.Time) []string {
	t.Helper()
	return ids(f.tr.Eligible(&featuretest.Tx{At: now}, f.queue()))
}
