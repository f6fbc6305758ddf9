package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestCommitAndLoad(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	j := api.Job{ID: "j1", User: "ana", Project: "p", Command: "true", State: api.StateQueued, Priority: api.PriorityHigh, SubmittedAt: at}
	b := &Batch{
		Jobs:        []api.Job{j},
		Events:      []JobEvent{{"j1", api.Event{At: at, To: api.StateQueued, Reason: api.ReasonSubmitted}}},
		Holds:       []api.Hold{{JobID: "nb", HeldAt: at, Allocation: []api.Allocation{{NodeID: "n", GPUID: 3}}}},
		Idempotency: map[string]string{"k1": "j1"},
		Settings:    map[string]string{"policy": "fcfs"},
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	j.State = api.StateRunning
	if err := s.Commit(ctx, &Batch{Jobs: []api.Job{j}, Events: []JobEvent{{"j1", api.Event{At: at, From: api.StateQueued, To: api.StateRunning, Reason: "started"}}}}); err != nil {
		t.Fatal(err)
	}
	// A batch that breaks a constraint (the idempotency key exists) changes nothing.
	bad := &Batch{Jobs: []api.Job{{ID: "j2", State: api.StateQueued}}, Idempotency: map[string]string{"k1": "j2"}}
	if err := s.Commit(ctx, bad); err == nil {
		t.Fatal("duplicate idempotency key committed")
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
	if len(st.Jobs) != 1 || st.Jobs[0].State != api.StateRunning || st.Jobs[0].Priority != api.PriorityHigh {
		t.Fatalf("jobs = %+v", st.Jobs)
	}
	if len(st.Jobs[0].Events) != 2 || st.Jobs[0].Events[1].To != api.StateRunning {
		t.Fatalf("events = %+v", st.Jobs[0].Events)
	}
	if st.Idempotency["k1"] != "j1" || st.Settings["policy"] != "fcfs" || len(st.Holds) != 1 || st.Holds[0].Allocation[0].GPUID != 3 {
		t.Fatalf("state = %+v", st)
	}
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	release()
	release2, err := Lock(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}

// TestBatchAudit: a batch's audit entries are committed with its jobs, all
// or nothing.
func TestBatchAudit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	entry := api.AuditEntry{At: at, User: "ana", Action: "job.submit", Target: "j1", Status: 201}
	if (&Batch{Audit: []api.AuditEntry{entry}}).Empty() {
		t.Error("a batch with only an audit entry is empty")
	}
	if err := s.Commit(ctx, &Batch{Jobs: []api.Job{{ID: "j1", User: "ana", State: api.StateQueued, Priority: api.PriorityHigh}}, Idempotency: map[string]string{"k": "j1"},
		Audit: []api.AuditEntry{entry}}); err != nil {
		t.Fatal(err)
	}
	// A failing batch (the key exists) leaves no audit row either.
	entry.Target = "j2"
	if err := s.Commit(ctx, &Batch{Jobs: []api.Job{{ID: "j2", State: api.StateQueued}}, Idempotency: map[string]string{"k": "j2"},
		Audit: []api.AuditEntry{entry}}); err == nil {
		t.Fatal("duplicate idempotency key committed")
	}
	got, err := s.Audit(ctx, AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Target != "j1" || got[0].User != "ana" || got[0].Status != 201 {
		t.Errorf("audit: %+v, want j1's submission only", got)
	}
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ID != "j1" {
		t.Errorf("jobs: %+v", st.Jobs)
	}
}

func TestPruneAudit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for i := range 5 {
		e := api.AuditEntry{At: base.Add(time.Duration(i) * time.Hour), User: "ana", Action: "job.cancel", Target: string(rune('a' + i))}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Entries before 11:00 go; the one at 11:00 stays.
	n, err := s.PruneAudit(ctx, base.Add(2*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	got, err := s.Audit(ctx, AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var targets string
	for _, e := range got {
		targets += e.Target
	}
	if targets != "edc" {
		t.Fatalf("kept %q, want the three newest, newest first (edc)", targets)
	}
}

// The indexes earlier versions made on jobs(state) and events(job_id),
// which nothing reads, are dropped when such a database is opened.
func TestOpenDropsUnusedIndexes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE INDEX jobs_state ON jobs(state)`, `CREATE INDEX events_job ON events(job_id)`} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('jobs_state', 'events_job')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d of the unused indexes are still there", n)
	}
}
