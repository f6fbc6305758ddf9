package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestOutboxWithTheBatch: outbox rows committed in a batch are there after
// the store is reopened, pending; the sender's updates are kept; removing
// an endpoint fails its pending rows and keeps its delivered ones.
func TestOutboxWithTheBatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	b := &Batch{
		Jobs:   []api.Job{{ID: "j1", State: api.StateFailed, User: "ana", Project: "nlp"}},
		Events: []JobEvent{{JobID: "j1", Event: api.Event{At: at, To: api.StateFailed, Reason: api.ReasonExitCode}}},
		Outbox: []OutboxItem{
			{EndpointID: "ne_a", Kind: "job.failed", CreatedAt: at, Data: `{"kind":"job.failed"}`},
			{EndpointID: "ne_b", Kind: "job.failed", CreatedAt: at, Data: `{"kind":"job.failed"}`},
		},
	}
	if b.Empty() {
		t.Fatal("a batch with outbox rows is empty")
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, &Batch{Outbox: []OutboxItem{{EndpointID: "ne_a", Kind: "job.began", CreatedAt: at.Add(time.Second), Data: "{}"}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := s.PendingOutbox(ctx, 10)
	if err != nil || len(p) != 3 || p[0].State != OutboxPending || !p[0].NextAt.Equal(at) || p[0].Seq == 0 || p[2].Kind != "job.began" {
		t.Fatalf("pending after reopening: %+v %v", p, err)
	}
	next := at.Add(time.Minute)
	if err := s.UpdateOutbox(ctx,
		OutboxUpdate{Seq: p[0].Seq, State: OutboxDelivered, Attempts: 1, DeliveredAt: at, NextAt: at},
		OutboxUpdate{Seq: p[2].Seq, State: OutboxPending, Attempts: 2, NextAt: next, LastError: "503", Digest: p[2].Seq}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEndpoint(ctx, "ne_a"); err != nil {
		t.Fatal(err)
	}
	all, err := s.Outbox(ctx, OutboxFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("outbox: %+v %v", all, err)
	}
	bySeq := map[int64]OutboxItem{}
	for _, it := range all {
		bySeq[it.Seq] = it
	}
	if d := bySeq[p[0].Seq]; d.State != OutboxDelivered || !d.DeliveredAt.Equal(at) || d.Attempts != 1 {
		t.Errorf("delivered row: %+v", d)
	}
	if f := bySeq[p[2].Seq]; f.State != OutboxFailed || f.Attempts != 2 || f.Digest != p[2].Seq {
		t.Errorf("row of the removed endpoint: %+v", f)
	}
	if r := bySeq[p[1].Seq]; r.State != OutboxPending {
		t.Errorf("another endpoint's row: %+v", r)
	}
	if due, _ := s.DueOutbox(ctx, at.Add(time.Hour), []string{"ne_x"}, 10); len(due) != 1 || due[0].EndpointID != "ne_b" {
		t.Errorf("due: %+v", due)
	}
	if due, _ := s.DueOutbox(ctx, at.Add(time.Hour), []string{"ne_b"}, 10); len(due) != 0 {
		t.Errorf("due, skipping ne_b: %+v", due)
	}
	if due, _ := s.DueOutbox(ctx, at.Add(-time.Second), nil, 10); len(due) != 0 {
		t.Errorf("due before its time: %+v", due)
	}
	if next, ok, err := s.NextOutbox(ctx, at.Add(-time.Second)); err != nil || !ok || !next.Equal(at) {
		t.Errorf("next: %v %v %v", next, ok, err)
	}
	if _, ok, _ := s.NextOutbox(ctx, at.Add(time.Hour)); ok {
		t.Errorf("a next row after every row")
	}
	if only, _ := s.Outbox(ctx, OutboxFilter{Endpoints: []string{"ne_b"}}); len(only) != 1 || only[0].EndpointID != "ne_b" {
		t.Errorf("filter by endpoint: %+v", only)
	}
	if none, _ := s.Outbox(ctx, OutboxFilter{Endpoints: []string{}}); len(none) != 0 {
		t.Errorf("an empty endpoint list matched %d rows", len(none))
	}
}

// TestPruneOutbox: old delivered and failed rows go; pending ones and new
// ones stay.
func TestPruneOutbox(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, recent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	err = s.AppendOutbox(ctx,
		OutboxItem{EndpointID: "e", Kind: "k", CreatedAt: old, State: OutboxDelivered, Data: "{}"},
		OutboxItem{EndpointID: "e", Kind: "k", CreatedAt: old, State: OutboxFailed, Data: "{}"},
		OutboxItem{EndpointID: "e", Kind: "k", CreatedAt: old, Data: "{}"},
		OutboxItem{EndpointID: "e", Kind: "k", CreatedAt: recent, State: OutboxDelivered, Data: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneOutbox(ctx, recent.Add(-time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	left, _ := s.Outbox(ctx, OutboxFilter{})
	if len(left) != 2 || left[0].CreatedAt != recent || left[1].State != OutboxPending {
		t.Errorf("left %+v", left)
	}
}
