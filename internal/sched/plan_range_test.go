package sched

import (
	"testing"
	"time"
)

// A start's range comes from the plans made with the low ends, the
// points and the high ends of the learned estimates ahead of it; without
// learned estimates the range is the one start.
func TestEstimateStartRanges(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	full := node("n1", 4, "H100", 80, 0, 1, 2, 3)
	run := func(est, low, point time.Duration) []Running {
		return []Running{{ID: "r", User: "a", Project: "p", StartedAt: now, SubmittedAt: now, Estimate: est,
			EstimateLow: low, EstimatePoint: point, Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}}}
	}
	for _, c := range []struct {
		name    string
		running []Running
		queue   []Job
		want    map[string]StartRange
	}{
		{"no learned estimates", run(2*time.Hour, 0, 0),
			[]Job{{ID: "w", User: "b", Project: "p", GPUs: 4, Estimate: time.Hour, SubmittedAt: now}},
			map[string]StartRange{"w": {At: now.Add(2 * time.Hour), From: now.Add(2 * time.Hour), To: now.Add(2 * time.Hour)}}},
		{"a running job's range", run(2*time.Hour, 30*time.Minute, time.Hour),
			[]Job{{ID: "w", User: "b", Project: "p", GPUs: 4, Estimate: time.Hour, SubmittedAt: now}},
			map[string]StartRange{"w": {At: now.Add(time.Hour), From: now.Add(30 * time.Minute), To: now.Add(2 * time.Hour)}}},
		{"ranges ahead add up", run(2*time.Hour, 30*time.Minute, time.Hour),
			[]Job{{ID: "w1", User: "b", Project: "p", GPUs: 4, Estimate: 3 * time.Hour, EstimateLow: time.Hour, EstimatePoint: 2 * time.Hour, SubmittedAt: now},
				{ID: "w2", User: "c", Project: "p", GPUs: 4, Estimate: time.Hour, SubmittedAt: now.Add(time.Second)}},
			map[string]StartRange{
				"w1": {At: now.Add(time.Hour), From: now.Add(30 * time.Minute), To: now.Add(2 * time.Hour)},
				"w2": {At: now.Add(3 * time.Hour), From: now.Add(90 * time.Minute), To: now.Add(5 * time.Hour)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Snapshot{Now: now, Nodes: []Node{full}, Running: c.running, Queue: c.queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}}
			r := Schedule(s)
			got := EstimateStartRanges(s, r, DefaultPlanDepth)
			if len(got) != len(c.want) {
				t.Fatalf("ranges %+v; want %+v", got, c.want)
			}
			for id, want := range c.want {
				if g := got[id]; !g.At.Equal(want.At) || !g.From.Equal(want.From) || !g.To.Equal(want.To) {
					t.Errorf("%s: %+v; want %+v", id, g, want)
				}
			}
			// The plan of record is the core's own estimates' (the high ends).
			plain := EstimateStarts(s, r, DefaultPlanDepth)
			for id, at := range plain {
				if !at.Equal(got[id].To) {
					t.Errorf("%s: EstimateStarts %v; want the range's end %v", id, at, got[id].To)
				}
			}
		})
	}
}

// BenchmarkEstimateStartRanges is BenchmarkEstimateStarts with every job
// holding a learned estimate (the three plans), and without any (one).
func BenchmarkEstimateStartRanges(b *testing.B) {
	for _, learned := range []bool{false, true} {
		name := "none learned"
		if learned {
			name = "all learned"
		}
		b.Run(name, func(b *testing.B) {
			s := benchSnapshot(10000, Policy{Name: PolicyFairShare, Backfill: true})
			if learned {
				for i := range s.Queue {
					s.Queue[i].EstimateLow, s.Queue[i].EstimatePoint = s.Queue[i].Estimate/2, s.Queue[i].Estimate*3/4
				}
				for i := range s.Running {
					s.Running[i].EstimateLow, s.Running[i].EstimatePoint = s.Running[i].Estimate/2, s.Running[i].Estimate*3/4
				}
			}
			r := Schedule(s)
			for b.Loop() {
				EstimateStartRanges(s, r, DefaultPlanDepth)
			}
		})
	}
}
