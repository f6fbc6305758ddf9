package history

import (
	"testing"
	"time"
)

// TestHistoryBuckets: samples are averaged into steps, counts are
// summed, old samples fall out of the ring, and the window is clamped to
// the retention.
func TestHistoryBuckets(t *testing.T) {
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	now := base
	var o Books
	// Two hours of samples: allocated goes 0,1,2,3,0,1,..., one start per sample.
	for i := range 480 {
		now = base.Add(time.Duration(i) * Interval)
		o.add(sample{at: now, total: 8, allocated: int32(i % 4), utilSum: 400, started: 1, waitSum: 10, waitMax: 10,
			nodes: []nodeSample{{id: "n1", gpus: 8, allocated: int16(i % 4), utilSum: 400}}})
	}
	tests := map[string]struct {
		q          Query
		wantPoints int
		wantStep   time.Duration
	}{
		"hour at full resolution": {Query{Since: now.Add(-time.Hour), Points: 1000}, 240, Interval},
		"hour in 60 points":       {Query{Since: now.Add(-time.Hour), Points: 60}, 60, time.Minute},
		"default window":          {Query{}, 60, time.Minute},
		"node too":                {Query{Since: now.Add(-time.Hour), Points: 60, Node: "n1"}, 60, time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.q.Points == 0 && tc.q.Since.IsZero() {
				tc.q.Points = 60
			}
			h := o.History(tc.q, now)
			if got := len(h.Points); got < tc.wantPoints || got > tc.wantPoints+1 {
				t.Fatalf("%d points, want about %d", got, tc.wantPoints)
			}
			if h.Step.Duration() != tc.wantStep {
				t.Fatalf("step %v, want %v", h.Step.Duration(), tc.wantStep)
			}
			p := h.Points[len(h.Points)/2]
			perStep := int(tc.wantStep / Interval)
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
	for range slots {
		now = now.Add(Interval)
		o.add(sample{at: now, total: 4})
	}
	h := o.History(Query{Since: base, Points: 5000}, now)
	if len(h.Points) == 0 || h.Points[0].TotalGPUs != 4 || h.Since.Before(now.Add(-Retention)) {
		t.Fatalf("after wrapping: since %v, first %+v", h.Since, h.Points[0])
	}
	if o.ring.Len() != slots {
		t.Fatalf("ring holds %d samples, want %d", o.ring.Len(), slots)
	}
}
