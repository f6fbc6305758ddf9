package lease_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/lease"
	"github.com/corral-sched/corral/internal/store/storetest"
)

const ttl = 9 * time.Second

// backends gives each test two handles on one lease row (two servers).
func backends(t *testing.T) map[string]func(t *testing.T) (a, b lease.Backend, sa, sb *store.Store) {
	open := func(t *testing.T, o func() (*store.Store, error)) *store.Store {
		s, err := o()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ctx := context.Background()
	return map[string]func(t *testing.T) (a, b lease.Backend, sa, sb *store.Store){
		"fake": func(t *testing.T) (a, b lease.Backend, sa, sb *store.Store) {
			f := &lease.Fake{}
			return f, f, nil, nil
		},
		"sqlite": func(t *testing.T) (a, b lease.Backend, sa, sb *store.Store) {
			path := filepath.Join(t.TempDir(), "corral.db")
			sa = open(t, func() (*store.Store, error) { return store.Open(ctx, path) })
			sb = open(t, func() (*store.Store, error) { return store.Open(ctx, path) })
			return sa, sb, sa, sb
		},
		"postgres": func(t *testing.T) (a, b lease.Backend, sa, sb *store.Store) {
			dsn := storetest.Postgres(t)
			sa = open(t, func() (*store.Store, error) { return store.OpenPostgres(ctx, dsn) })
			sb = open(t, func() (*store.Store, error) { return store.OpenPostgres(ctx, dsn) })
			return sa, sb, sa, sb
		},
	}
}

func TestElection(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ba, bb, sa, sb := mk(t)
			now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			var deposedA atomic.Int64
			a := lease.New(lease.Config{Backend: ba, Holder: "a", TTL: ttl, Now: clock,
				OnDeposed: func(e int64) { deposedA.Store(e) }})
			b := lease.New(lease.Config{Backend: bb, Holder: "b", TTL: ttl, Now: clock})

			a.Step(ctx)
			ea, ok := a.Leading()
			if !ok || ea < 1 {
				t.Fatalf("a: epoch %d, leading %v; want to lead", ea, ok)
			}
			b.Step(ctx)
			if _, ok := b.Leading(); ok {
				t.Fatal("b leads while a's lease is valid")
			}
			if sa != nil {
				sa.Fence(ea, nil)
				if err := sa.Commit(ctx, job("j1")); err != nil {
					t.Fatalf("leader's fenced commit: %v", err)
				}
			}

			// a renews at TTL/3: b still cannot take the lease at TTL.
			now = now.Add(ttl / 3)
			a.Step(ctx)
			now = now.Add(ttl * 2 / 3)
			b.Step(ctx)
			if _, ok := b.Leading(); ok {
				t.Fatal("b took a renewed lease")
			}
			// a stops trusting its lease 2/3 TTL after its last renewal
			// began, before the lease ends.
			if _, ok := a.Leading(); ok {
				t.Fatal("a trusts its lease 2/3 TTL after its last renewal")
			}

			// a is silent past the TTL: b takes the lease, with a greater epoch.
			now = now.Add(ttl / 3)
			b.Step(ctx)
			eb, ok := b.Leading()
			if !ok || eb <= ea {
				t.Fatalf("b: epoch %d, leading %v; want to lead with an epoch above %d", eb, ok, ea)
			}
			if sa != nil {
				// Fencing: a's commits fail inside their transaction, and
				// a is told to step down.
				var told atomic.Bool
				sa.Fence(ea, func() { told.Store(true) })
				if err := sa.Commit(ctx, job("j2")); !errors.Is(err, store.ErrDeposed) {
					t.Fatalf("deposed leader's commit: %v, want ErrDeposed", err)
				}
				if !told.Load() {
					t.Fatal("onDeposed not called")
				}
				if err := sa.Commit(ctx, job("j3")); !errors.Is(err, store.ErrDeposed) {
					t.Fatalf("deposed leader's second commit: %v, want ErrDeposed", err)
				}
				sb.Fence(eb, nil)
				if err := sb.Commit(ctx, job("j4")); err != nil {
					t.Fatalf("new leader's commit: %v", err)
				}
				st, err := sb.Load(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Jobs) != 2 || st.Jobs[0].ID != "j1" || st.Jobs[1].ID != "j4" {
					t.Fatalf("jobs = %v, want j1 and j4 only", st.Jobs)
				}
			}
			// a's next step finds the lease gone and steps down.
			a.Step(ctx)
			if deposedA.Load() != ea {
				t.Fatalf("a's OnDeposed got epoch %d, want %d", deposedA.Load(), ea)
			}
			// A clean release lets a take over at once, with a new epoch.
			if err := bb.ReleaseLease(ctx, "b", eb); err != nil {
				t.Fatal(err)
			}
			a.Step(ctx)
			if e, ok := a.Leading(); !ok || e <= eb {
				t.Fatalf("a after b's release: epoch %d, leading %v", e, ok)
			}
		})
	}
}

func job(id string) *store.Batch {
	return &store.Batch{Jobs: []api.Job{{ID: id, State: api.StateQueued, Priority: api.PriorityNormal}}}
}
