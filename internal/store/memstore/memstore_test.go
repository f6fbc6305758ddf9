package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/memstore"
	"github.com/corral-sched/corral/internal/store/storetest"
)

// TestConformance holds the in-memory store to what the SQL stores do.
func TestConformance(t *testing.T) {
	storetest.RunLog(t, func(t *testing.T) storetest.Log { return memstore.New() })
}

// TestFailCommits: a store that is down refuses batches, not as a
// permanent error (the loop retries), and writes nothing until it is up.
func TestFailCommits(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	down := errors.New("disk gone")
	s.FailCommits(down)
	b := &store.Batch{Jobs: []api.Job{{ID: "j1", User: "ana", State: api.StateQueued, Priority: api.PriorityNormal}}}
	if err := s.Commit(ctx, b); !errors.Is(err, down) || store.Permanent(err) {
		t.Fatalf("commit while down = %v: want %v, not permanent", err, down)
	}
	if st, _ := s.Load(ctx); len(st.Jobs) != 0 {
		t.Fatalf("a job was written while down: %+v", st.Jobs)
	}
	s.FailCommits(nil)
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Load(ctx); len(st.Jobs) != 1 {
		t.Fatalf("jobs after the store is back = %+v", st.Jobs)
	}
}

// TestRowsAreCopies: a caller changing what it committed or loaded does
// not change the store.
func TestRowsAreCopies(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	j := api.Job{ID: "j1", User: "ana", State: api.StateQueued, Priority: api.PriorityNormal, Env: map[string]string{"A": "1"}}
	if err := s.Commit(ctx, &store.Batch{Jobs: []api.Job{j}}); err != nil {
		t.Fatal(err)
	}
	j.Env["A"] = "2"
	st, _ := s.Load(ctx)
	st.Jobs[0].Env["A"] = "3"
	if got, _ := s.Job(ctx, "j1"); got.Env["A"] != "1" {
		t.Fatalf("stored env = %v: want the committed one", got.Env)
	}
}
