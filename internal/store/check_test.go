package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// TestPermanent: errors a retry cannot fix are told from those of the
// moment, which the orchestrator retries.
func TestPermanent(t *testing.T) {
	_, jsonErr := json.Marshal(api.Reservation{Name: "x", End: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unstorable", fmt.Errorf("commit: %w", ErrUnstorable), true},
		{"a time past year 9999", fmt.Errorf("commit: %w", jsonErr), true},
		{"postgres: NUL in text", &pgconn.PgError{Code: "22021"}, true},
		{"postgres: unique violation", &pgconn.PgError{Code: "23505"}, true},
		{"postgres: disk full", &pgconn.PgError{Code: "53100"}, false},
		{"postgres: connection lost", &pgconn.PgError{Code: "08006"}, false},
		{"disk full", fmt.Errorf("commit: %w", syscall.ENOSPC), false},
		{"I/O", io.ErrUnexpectedEOF, false},
		{"closed", ErrClosed, false},
	} {
		if got := Permanent(c.err); got != c.want {
			t.Errorf("%s: Permanent(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestUnstorableRows: Unstorable names exactly the rows the store cannot
// write, Drop leaves them out, and the rest commits; on SQLite the batch
// with them fails with a Permanent error.
func TestUnstorableRows(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	y3000, y10000 := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &Batch{
		Jobs: []api.Job{
			{ID: "j1", User: "u", Project: "p", State: api.StateQueued, Priority: api.PriorityNormal, SubmittedAt: now},
			{ID: "j2", User: "u", Project: "p", State: api.StateQueued, Priority: api.PriorityNormal, SubmittedAt: y3000},
			{ID: "j3", User: "u\x00", Project: "p", State: api.StateQueued, Priority: api.PriorityNormal, SubmittedAt: now},
		},
		Bookings: []api.Reservation{{Name: "ok", Start: now, End: now.Add(time.Hour)}, {Name: "x3", Start: now, End: y10000}},
		Usage:    []usage.Record{{Kind: "job", ID: "j1", Start: now, End: y3000}},
		Settings: map[string]string{"k": "v"},
	}
	if err := s.Commit(ctx, b); !Permanent(err) {
		t.Fatalf("commit with unstorable rows: %v, want a permanent error", err)
	}
	bad := b.Unstorable()
	want := []struct {
		part Part
		key  string
	}{{PartJobs, "j2"}, {PartJobs, "j3"}, {PartBookings, "x3"}, {PartUsage, "j1"}}
	if len(bad) != len(want) {
		t.Fatalf("Unstorable: %v, want %v", bad, want)
	}
	for i, w := range want {
		if bad[i].Part != w.part || bad[i].Key != w.key || !errors.Is(bad[i].Err, ErrUnstorable) {
			t.Errorf("row %d: %+v, want %v %s", i, bad[i], w.part, w.key)
		}
	}
	b.Drop(bad)
	if err := s.Commit(ctx, b); err != nil {
		t.Fatalf("commit without them: %v", err)
	}
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ID != "j1" || len(st.Bookings) != 1 || st.Bookings[0].Name != "ok" || st.Settings["k"] != "v" {
		t.Fatalf("stored: jobs %v bookings %v settings %v", st.Jobs, st.Bookings, st.Settings)
	}
}
