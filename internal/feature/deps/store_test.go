package deps

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// downStore is a store that cannot be read.
type downStore struct{}

var errDown = errors.New("the store is down")

func (downStore) Job(context.Context, string) (api.Job, error) { return api.Job{}, errDown }
func (downStore) FirstEnded(context.Context, string, ...api.State) (api.Job, error) {
	return api.Job{}, errDown
}
func (downStore) DependencyIDs(context.Context, string, int) ([]string, error) { return nil, errDown }

// TestPredecessorInStore: a predecessor that left memory is read from
// the store: its outcome when the store holds it; pruned (afterok never
// met) when there is no store; and when the store cannot be read, the
// job waits, neither eligible nor canceled.
func TestPredecessorInStore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		store    func(f *fakeJobs) Store
		eligible bool
		canceled bool
	}{
		{"the store holds it, completed", func(f *fakeJobs) Store { return fakeStore{f} }, true, false},
		{"no store: pruned", func(*fakeJobs) Store { return nil }, false, true},
		{"the store is down: it waits", func(*fakeJobs) Store { return downStore{} }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.stored["jdone0"] = api.Job{ID: "jdone0", State: api.StateCompleted}
			f.tr = New(f, Config{Timeout: -1, MinIDPrefix: 5, Store: tc.store(f), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			f.add("jnext0", api.StateQueued, "afterok:jdone0")
			got := eligible(t, f, t0.Add(time.Minute))
			if slices.Contains(got, "jnext0") != tc.eligible {
				t.Fatalf("eligible = %v; want jnext0 eligible %v", got, tc.eligible)
			}
			if slices.Contains(f.canceled, "jnext0") != tc.canceled {
				t.Fatalf("canceled = %v; want jnext0 canceled %v", f.canceled, tc.canceled)
			}
		})
	}
}
