package ended

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"slices"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

type fakeLive struct {
	jobs map[string]*api.Job
	keys map[string]string
}

func (l fakeLive) Get(id string) *api.Job { return l.jobs[id] }
func (l fakeLive) Active() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, j := range l.jobs {
			if j.State.Active() && !yield(j) {
				return
			}
		}
	}
}
func (l fakeLive) Key(k string) (string, bool) { id, ok := l.keys[k]; return id, ok }

type fakeStore struct {
	jobs map[string]api.Job
	keys map[string]string
	err  error // every read fails with it
}

func (s fakeStore) Job(_ context.Context, id string) (api.Job, error) {
	if s.err != nil {
		return api.Job{}, s.err
	}
	j, ok := s.jobs[id]
	if !ok {
		return api.Job{}, store.ErrNoJob
	}
	return j, nil
}

func (s fakeStore) IdempotentJob(_ context.Context, k string) (string, bool, error) {
	if s.err != nil {
		return "", false, s.err
	}
	id, ok := s.keys[k]
	return id, ok, nil
}

// TestFinder: a job is found live, then among the recent, then in the
// store; a slim recent copy is read whole from the store.
func TestFinder(t *testing.T) {
	live := fakeLive{jobs: map[string]*api.Job{"run": {ID: "run", State: api.StateRunning}, "q": {ID: "q", State: api.StateQueued}}, keys: map[string]string{"k1": "run"}}
	var gone Books
	gone.Remember(&api.Job{ID: "recent", State: api.StateCompleted}, false)
	gone.Remember(&api.Job{ID: "slim", State: api.StateFailed}, true)
	st := fakeStore{jobs: map[string]api.Job{"old": {ID: "old", State: api.StateCanceled}, "slim": {ID: "slim", State: api.StateFailed, Command: "whole"}},
		keys: map[string]string{"k2": "old"}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := Finder{Live: live, Gone: &gone, Store: st, Log: quiet}
	down := Finder{Live: live, Gone: &gone, Store: fakeStore{err: errors.New("down")}, Log: quiet}
	bare := Finder{Live: live, Gone: &gone, Log: quiet}

	for _, tc := range []struct {
		f            Finder
		id           string
		inMemory     bool
		any          bool
		command      string
		endedErrCode int // 409 or 404; 0: not asked
	}{
		{f, "run", true, true, "", 0},
		{f, "recent", true, true, "", 409},
		{f, "slim", true, true, "whole", 409},
		{f, "old", false, true, "", 409},
		{f, "none", false, false, "", 404},
		{down, "old", false, false, "", 404},
		{bare, "old", false, false, "", 404},
		{bare, "recent", true, true, "", 409},
	} {
		if _, ok := tc.f.Lookup(tc.id); ok != tc.inMemory {
			t.Errorf("Lookup(%s) = %v, want %v", tc.id, ok, tc.inMemory)
		}
		j, ok := tc.f.LookupAny(tc.id)
		if ok != tc.any || ok && j.Command != tc.command {
			t.Errorf("LookupAny(%s) = %+v %v, want found %v with command %q", tc.id, j, ok, tc.any, tc.command)
		}
		if tc.endedErrCode != 0 {
			var e *api.Error
			if err := tc.f.EndedError(tc.id); !errors.As(err, &e) || e.Status != tc.endedErrCode {
				t.Errorf("EndedError(%s) = %v, want %d", tc.id, err, tc.endedErrCode)
			}
		}
	}

	for _, tc := range []struct {
		f    Finder
		key  string
		want string
	}{{f, "k1", "run"}, {f, "k2", "old"}, {f, "k3", ""}, {down, "k2", ""}, {bare, "k1", "run"}} {
		if id, ok := tc.f.Submitted(tc.key); id != tc.want || ok != (tc.want != "") {
			t.Errorf("Submitted(%s) = %q %v, want %q", tc.key, id, ok, tc.want)
		}
	}

	var started []string
	for j := range f.Started() {
		started = append(started, j.ID)
	}
	slices.Sort(started)
	if want := []string{"recent", "run", "slim"}; !slices.Equal(started, want) {
		t.Errorf("Started = %v, want %v", started, want)
	}
}
