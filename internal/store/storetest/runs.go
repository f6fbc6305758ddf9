package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// testRuns: run rows commit with the change that ends their attempt,
// come back at Load oldest first, a row written again replaces itself,
// and a row the table cannot hold fails its batch whole.
func testRuns(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	run := func(id string, attempt int, ran time.Duration, end time.Time) store.RunRow {
		return store.RunRow{JobID: id, Attempt: attempt, User: "ana", Project: "vision", Name: "resnet-sweep", CommandFP: "9f86d081884c7d65",
			GPUs: 4, GPUModel: "NVIDIA H100", TimeLimit: 2 * time.Hour, Ran: ran, EndedAt: end, Outcome: "exited"}
	}
	end1, end2 := at.Add(time.Hour), at.Add(2*time.Hour)
	done := func(id string, end time.Time) api.Job {
		return api.Job{ID: id, User: "ana", State: api.StateCompleted, Priority: api.PriorityNormal, SubmittedAt: at, StartedAt: &at, FinishedAt: &end}
	}
	// Written out of order: Load sorts by end time.
	if err := s.Commit(ctx, &store.Batch{Jobs: []api.Job{done("j2", end2)}, Runs: []store.RunRow{run("j2", 0, 2*time.Hour, end2)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, &store.Batch{Jobs: []api.Job{done("j1", end1)}, Runs: []store.RunRow{run("j1", 1, 40*time.Minute, end1)}}); err != nil {
		t.Fatal(err)
	}
	// The same attempt again replaces its row.
	if err := s.Commit(ctx, &store.Batch{Runs: []store.RunRow{run("j1", 1, 50*time.Minute, end1)}}); err != nil {
		t.Fatal(err)
	}
	bad := run("j3", 0, time.Minute, end2)
	bad.Name = "nul\x00name"
	for _, c := range []struct {
		name string
		row  store.RunRow
	}{
		{"text with a NUL byte", bad},
		{"a negative run time", run("j3", 0, -time.Minute, end2)},
		{"an end past the store's years", run("j3", 0, time.Minute, time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC))},
	} {
		err := s.Commit(ctx, &store.Batch{Jobs: []api.Job{done("j3", end2)}, Runs: []store.RunRow{c.row}})
		if !errors.Is(err, store.ErrUnstorable) {
			t.Fatalf("%s: Commit = %v; want ErrUnstorable", c.name, err)
		}
		if bad := (&store.Batch{Runs: []store.RunRow{c.row}}).Unstorable(); len(bad) != 1 || bad[0].Part != store.PartRuns {
			t.Fatalf("%s: Unstorable = %v; want the run row", c.name, bad)
		}
	}
	s.Close()
	s = open(t, o)
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RunRow{run("j1", 1, 50*time.Minute, end1), run("j2", 0, 2*time.Hour, end2)}
	if len(st.Runs) != len(want) {
		t.Fatalf("Load: %d runs %+v; want %d", len(st.Runs), st.Runs, len(want))
	}
	for i := range want {
		if got := st.Runs[i]; got != want[i] {
			t.Errorf("run %d = %+v; want %+v", i, got, want[i])
		}
	}
}
