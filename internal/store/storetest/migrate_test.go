package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/storetest"
)

// TestCopySQLiteToPostgres: a SQLite store copied into PostgreSQL loads
// the same state and reads the same audit, tokens and outbox; writes go
// on after the copy (the identity counters moved past the copied keys); a
// second copy into the now non-empty target is refused unless forced; and
// the copy back into a fresh SQLite file is the same again.
func TestCopySQLiteToPostgres(t *testing.T) {
	dsn := storetest.Postgres(t)
	ctx := context.Background()
	src, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for i := range 450 { // more than one INSERT of rows per table
		id := fmt.Sprintf("j%04d", i)
		b := &store.Batch{
			Jobs:        []api.Job{{ID: id, User: "ana", Project: "p", State: api.StateCompleted, Priority: api.PriorityNormal}},
			Events:      []store.JobEvent{{JobID: id, Event: api.Event{At: at, To: api.StateQueued}}, {JobID: id, Event: api.Event{At: at, From: api.StateQueued, To: api.StateCompleted}}},
			Idempotency: map[string]string{"k" + id: id},
			Audit:       []api.AuditEntry{{At: at, User: "ana", Action: "job.submit"}},
		}
		if i == 0 {
			b.Settings = map[string]string{"policy": "fcfs"}
			b.Nodes = map[string]string{"n1": `{"id":"n1"}`}
			b.Holds = []api.Hold{{JobID: "h1", HeldAt: at}}
			b.Outbox = []store.OutboxItem{{EndpointID: "e1", Kind: "job.completed", CreatedAt: at, NextAt: at, Data: "{}"}}
		}
		if err := src.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.PutToken(ctx, store.TokenRecord{Token: api.Token{ID: "t1", User: "ana"}, Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := src.PutHistory(ctx, at, []byte(`{"x":1}`), time.Time{}); err != nil {
		t.Fatal(err)
	}

	dst, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var calls int
	if err := store.Copy(ctx, src, dst, false, func(string, int64, int64) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls < 5 {
		t.Errorf("progress called %d times", calls)
	}
	same(t, ctx, src, dst)

	// Writes after the copy get new keys.
	if err := dst.AppendAudit(ctx, api.AuditEntry{At: at, User: "bo", Action: "x"}); err != nil {
		t.Fatalf("audit after the copy: %v", err)
	}
	got, err := dst.Audit(ctx, store.AuditFilter{Limit: 2})
	if err != nil || len(got) != 2 || got[0].User != "bo" || got[0].Seq != got[1].Seq+1 {
		t.Fatalf("audit after the copy = %+v, %v", got, err)
	}

	if err := store.Copy(ctx, src, dst, false, nil); !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("copy into a non-empty target: %v, want ErrNotEmpty", err)
	}
	if err := store.Copy(ctx, src, dst, true, nil); err != nil {
		t.Fatalf("forced copy: %v", err)
	}
	same(t, ctx, src, dst)

	back, err := store.Open(ctx, filepath.Join(t.TempDir(), "back.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if err := store.Copy(ctx, dst, back, false, nil); err != nil {
		t.Fatalf("copy back to SQLite: %v", err)
	}
	same(t, ctx, src, back)
}

// same fails the test unless a and b hold the same state.
func same(t *testing.T, ctx context.Context, a, b *store.Store) {
	t.Helper()
	for _, read := range []struct {
		name string
		fn   func(*store.Store) (any, error)
	}{
		{"load", func(s *store.Store) (any, error) { return s.Load(ctx) }},
		{"audit", func(s *store.Store) (any, error) { return s.Audit(ctx, store.AuditFilter{Limit: 10000}) }},
		{"tokens", func(s *store.Store) (any, error) { return s.Tokens(ctx) }},
		{"outbox", func(s *store.Store) (any, error) { return s.Outbox(ctx, store.OutboxFilter{}) }},
		{"history", func(s *store.Store) (any, error) { return s.History(ctx, time.Time{}) }},
	} {
		x, err := read.fn(a)
		if err != nil {
			t.Fatalf("%s: %v", read.name, err)
		}
		y, err := read.fn(b)
		if err != nil {
			t.Fatalf("%s: %v", read.name, err)
		}
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("%s differs after the copy:\n%+v\n%+v", read.name, x, y)
		}
	}
}
