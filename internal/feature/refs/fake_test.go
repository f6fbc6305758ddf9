package refs

import (
	"context"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// fakeJobs is the orchestrator's books as the feature reads them (Jobs,
// View and Store): jobs and arrays in memory, and the store's ended jobs, done
// arrays, numbers and names. It fails t when the store is read while a
// view is open, as the orchestrator's read lock would be held then.
type fakeJobs struct {
	t       *testing.T
	open    bool
	jobs    map[string]*api.Job // live
	recent  map[string]bool     // ended, still in memory
	arrays  map[string]bool     // in memory
	ended   []string            // job ids in the store only
	done    []string            // array ids in the store (done or not)
	numbers map[int64]string
	names   []store.Named // what the store answers for any name
	reads   []string      // the store's reads, in order
}

func newFake(t *testing.T) *fakeJobs {
	return &fakeJobs{t: t, jobs: map[string]*api.Job{}, recent: map[string]bool{}, arrays: map[string]bool{},
		numbers: map[int64]string{}}
}

// add puts jobs in memory; a task id ID_INDEX makes its array live too.
func (f *fakeJobs) add(js ...api.Job) {
	for i := range js {
		j := js[i]
		f.jobs[j.ID] = &j
		if j.ArrayJobID != "" {
			f.arrays[j.ArrayJobID] = true
		}
	}
}

func (f *fakeJobs) View() View {
	if f.open {
		f.t.Fatal("a view opened inside another")
	}
	f.open = true
	return f
}

func (f *fakeJobs) Done() {
	if !f.open {
		f.t.Fatal("Done on a closed view")
	}
	f.open = false
}

func (f *fakeJobs) Job(id string) bool {
	f.inView()
	_, live := f.jobs[id]
	return live || f.recent[id]
}

func (f *fakeJobs) Array(id string) bool { f.inView(); return f.arrays[id] }

func (f *fakeJobs) ArraysWithPrefix(prefix string, into map[string]bool) {
	f.inView()
	for id := range f.arrays {
		if strings.HasPrefix(id, prefix) {
			into[id] = true
		}
	}
}

func (f *fakeJobs) WithPrefix(prefix string) iter.Seq[*api.Job] {
	f.inView()
	return func(yield func(*api.Job) bool) {
		for id, j := range f.jobs {
			if strings.HasPrefix(id, prefix) && !yield(j) {
				return
			}
		}
	}
}

func (f *fakeJobs) All() iter.Seq[*api.Job] {
	f.inView()
	return func(yield func(*api.Job) bool) {
		for _, j := range f.jobs {
			if !yield(j) {
				return
			}
		}
	}
}

func (f fakeStore) NumberID(_ context.Context, n int64) (string, bool, error) {
	f.read("number")
	id, ok := f.numbers[n]
	return id, ok, nil
}

func (f fakeStore) Job(_ context.Context, id string) (api.Job, error) {
	f.read("job")
	if !slices.Contains(f.ended, id) {
		return api.Job{}, store.ErrNoJob
	}
	return api.Job{ID: id, State: api.StateCompleted}, nil
}

func (f fakeStore) JobIDsWithPrefix(_ context.Context, prefix string, limit int) ([]string, error) {
	f.read("job ids")
	return withPrefix(f.ended, prefix, limit), nil
}

func (f fakeStore) ArrayIDsWithPrefix(_ context.Context, prefix string, limit int) ([]string, error) {
	f.read("array ids")
	return withPrefix(f.done, prefix, limit), nil
}

func (f fakeStore) NamedJobs(_ context.Context, user, name string, limit int) ([]store.Named, error) {
	f.read("names")
	return f.names[:min(len(f.names), limit)], nil
}

func (f *fakeJobs) inView() {
	if !f.open {
		f.t.Fatal("memory read with no view open")
	}
}

func (f *fakeJobs) read(what string) {
	if f.open {
		f.t.Fatalf("the store read (%s) with a view open", what)
	}
	f.reads = append(f.reads, what)
}

func withPrefix(ids []string, prefix string, limit int) []string {
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) && len(out) < limit {
			out = append(out, id)
		}
	}
	return out
}

// fakeStore is the store as the feature reads it (Store): the store's
// part of fakeJobs.
type fakeStore struct{ *fakeJobs }
