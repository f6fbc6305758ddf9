package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// TestHistorySurvivesRestart: samples are stored as they are taken, a new
// orchestrator on the same store shows them, and samples older than the
// retention are dropped from the store.
func TestHistorySurvivesRestart(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	st := memstore.New() // the same store across restarts
	open := func() *Orchestrator {
		o, err := New(ctx, Config{Store: st, Executor: newFakeExec(), DataDir: t.TempDir(), Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := open()
	first := clk.now()
	o.SampleHistory(ctx)
	clk.add(history.Interval)
	o.SampleHistory(ctx)

	clk.add(time.Minute)
	o = open()
	h := o.FeatureOps().History.History(history.Query{Since: first.Add(-time.Minute), Points: 1000})
	if len(h.Points) != 2 || h.Points[0].At.After(first.Add(history.Interval)) {
		t.Fatalf("after a restart: points %+v; want the 2 samples from before, the first in the step after %v", h.Points, first)
	}
	// A day later, the old samples leave the store as a new one comes.
	clk.add(history.Retention)
	o.SampleHistory(ctx)
	o = open()
	h = o.FeatureOps().History.History(history.Query{Since: first, Points: 5000})
	if len(h.Points) != 1 {
		t.Fatalf("%d points a day later; want only the new sample", len(h.Points))
	}
	rows, err := st.History(ctx, time.Time{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("store holds %d samples (%v); want 1", len(rows), err)
	}
}
