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
