package orchestrator

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// TestClusterHistoryBuckets: samples are averaged into steps, counts are
// summed, old samples fall out of the ring, and the window is clamped to
// the retention.
func TestClusterHistoryBuckets(t *testing.T) {
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	now := base
	o := &Orchestrator{cfg: Config{Now: func() time.Time { return now }}}
	// Two hours of samples: allocated goes 0,1,2,3,0,1,..., one start per sample.
	for i := range 480 {
		now = base.Add(time.Duration(i) * HistoryInterval)
		o.hist.add(histSample{at: now, total: 8, allocated: int32(i % 4), utilSum: 400, started: 1, waitSum: 10, waitMax: 10,
			nodes: []nodeSample{{id: "n1", gpus: 8, allocated: int16(i % 4), utilSum: 400}}})
	}
	tests := map[string]struct {
		q          HistoryQuery
		wantPoints int
		wantStep   time.Duration
	}{
		"hour at full resolution": {HistoryQuery{Since: now.Add(-time.Hour), Points: 1000}, 240, HistoryInterval},
		"hour in 60 points":       {HistoryQuery{Since: now.Add(-time.Hour), Points: 60}, 60, time.Minute},
		"default window":          {HistoryQuery{}, 60, time.Minute},
		"node too":                {HistoryQuery{Since: now.Add(-time.Hour), Points: 60, Node: "n1"}, 60, time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.q.Points == 0 && tc.q.Since.IsZero() {
				tc.q.Points = 60
			}
			h := o.ClusterHistory(tc.q)
			if got := len(h.Points); got < tc.wantPoints || got > tc.wantPoints+1 {
				t.Fatalf("%d points, want about %d", got, tc.wantPoints)
			}
			if h.Step.Duration() != tc.wantStep {
				t.Fatalf("step %v, want %v", h.Step.Duration(), tc.wantStep)
			}
			p := h.Points[len(h.Points)/2]
			perStep := int(tc.wantStep / HistoryInterval)
			if p.TotalGPUs != 8 || p.Utilization != 50 || p.Started != perStep || *p.WaitMean != 10 {
				t.Fatalf("point %+v", p)
			}
			if perStep == 4 && p.AllocatedGPUs != 1.5 { // mean of 0,1,2,3
				t.Fatalf("allocated %v, want the mean 1.5", p.AllocatedGPUs)
			}
			if p.StartsPerHour != float64(perStep)/tc.wantStep.Hours() {
				t.Fatalf("starts per hour %v", p.StartsPerHour)
			}
			if (tc.q.Node != "") != (len(p.Nodes) == 1) {
				t.Fatalf("nodes %+v", p.Nodes)
			}
			if tc.q.Node != "" && (p.Nodes[0].Utilization != 50 || p.Nodes[0].GPUs != 8) {
				t.Fatalf("node point %+v", p.Nodes[0])
			}
		})
	}

	// Past the retention the ring wraps: the oldest samples are gone.
	for range historySlots {
		now = now.Add(HistoryInterval)
		o.hist.add(histSample{at: now, total: 4})
	}
	h := o.ClusterHistory(HistoryQuery{Since: base, Points: 5000})
	if len(h.Points) == 0 || h.Points[0].TotalGPUs != 4 || h.Since.Before(now.Add(-HistoryRetention)) {
		t.Fatalf("after wrapping: since %v, first %+v", h.Since, h.Points[0])
	}
	if o.hist.ring.len() != historySlots {
		t.Fatalf("ring holds %d samples, want %d", o.hist.ring.len(), historySlots)
	}
}

// TestHistorySurvivesRestart: samples are stored as they are taken, a new
// orchestrator on the same store shows them, and samples older than the
// retention are dropped from the store.
func TestHistorySurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	open := func() (*Orchestrator, *store.Store) {
		st, err := store.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		o, err := New(ctx, Config{Store: st, Executor: newFakeExec(), DataDir: t.TempDir(), Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		return o, st
	}
	o, st := open()
	first := clk.now()
	o.SampleHistory(ctx)
	clk.add(HistoryInterval)
	o.SampleHistory(ctx)
	st.Close()

	clk.add(time.Minute)
	o, st = open()
	h := o.ClusterHistory(HistoryQuery{Since: first.Add(-time.Minute), Points: 1000})
	if len(h.Points) != 2 || h.Points[0].At.After(first.Add(HistoryInterval)) {
		t.Fatalf("after a restart: points %+v; want the 2 samples from before, the first in the step after %v", h.Points, first)
	}
	// A day later, the old samples leave the store as a new one comes.
	clk.add(HistoryRetention)
	o.SampleHistory(ctx)
	st.Close()
	o, st = open()
	defer st.Close()
	h = o.ClusterHistory(HistoryQuery{Since: first, Points: 5000})
	if len(h.Points) != 1 {
		t.Fatalf("%d points a day later; want only the new sample", len(h.Points))
	}
	rows, err := st.History(ctx, time.Time{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("store holds %d samples (%v); want 1", len(rows), err)
	}
}
