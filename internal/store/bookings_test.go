package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestBookingsCommitAndLoad: bookings are upserted and deleted with
// their batch, and loaded in name order after a reopen; a batch that
// fails writes none of its bookings.
func TestBookingsCommitAndLoad(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	mk := func(name string, gpus int) api.Reservation {
		return api.Reservation{Name: name, GPUs: gpus, Start: at, End: at.Add(8 * time.Hour), Users: []string{"ana"}, Owner: "root",
			State: api.BookingScheduled, Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}}}
	}
	if (&Batch{DeleteBookings: []string{"x"}}).Empty() || (&Batch{Bookings: []api.Reservation{mk("x", 1)}}).Empty() {
		t.Fatal("a batch of bookings only is empty")
	}
	if err := s.Commit(ctx, &Batch{Bookings: []api.Reservation{mk("vision", 8), mk("b", 1), mk("gone", 2)}}); err != nil {
		t.Fatal(err)
	}
	v := mk("vision", 4)
	v.IdleGPUSeconds = 7200
	if err := s.Commit(ctx, &Batch{Bookings: []api.Reservation{v}, DeleteBookings: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	// A failing batch (a duplicate idempotency key) writes none of it.
	if err := s.Commit(ctx, &Batch{Idempotency: map[string]string{"k": "j1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, &Batch{Bookings: []api.Reservation{mk("never", 1)}, Jobs: []api.Job{{ID: "j1"}}, Idempotency: map[string]string{"k": "j2"}}); err == nil {
		t.Fatal("a batch with a taken idempotency key committed")
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Bookings) != 2 || st.Bookings[0].Name != "b" || st.Bookings[1].Name != "vision" {
		t.Fatalf("loaded %+v", st.Bookings)
	}
	if got := st.Bookings[1]; got.GPUs != 4 || got.IdleGPUSeconds != 7200 || !got.End.Equal(at.Add(8*time.Hour)) || got.Allocation[0].NodeID != "n1" {
		t.Fatalf("vision loaded as %+v", got)
	}
}
