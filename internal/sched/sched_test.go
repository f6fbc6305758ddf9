package sched

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// node builds a schedulable node with n free GPUs of the given model and
// memory; busy lists indexes already taken.
func node(id string, n int, model string, memGB int64, busy ...int) Node {
	nd := Node{ID: id, Schedulable: true}
	for i := range n {
		nd.GPUs = append(nd.GPUs, GPU{Index: i, Model: model, MemoryMiB: memGB * 1024, Free: true})
	}
	for _, b := range busy {
		nd.GPUs[b].Free = false
	}
	return nd
}

// job builds a queued job submitted `at` minutes after t0.
func job(id string, gpus, prio, at int) Job {
	return Job{ID: id, User: "u", Priority: prio, GPUs: gpus, SubmittedAt: t0.Add(time.Duration(at) * time.Minute)}
}

func startIDs(r Result) []string {
	ids := []string{}
	for _, s := range r.Starts {
		ids = append(ids, s.JobID)
	}
	return ids
}

func TestOrder(t *testing.T) {
	q := []Job{job("a", 1, 1, 0), job("b", 1, 3, 1), job("c", 1, 3, 2), job("d", 1, 4, 3), job("e", 1, 2, 0)}
	tests := map[string]struct {
		policy string
		want   []string
	}{
		// priority: critical d, then the two highs in submission order, then normal, then low.
		"priority": {PolicyPriority, []string{"d", "b", "c", "e", "a"}},
		// fcfs: submission order; a and e tie on time and break on id.
		"fcfs": {PolicyFCFS, []string{"a", "e", "b", "c", "d"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, j := range Order(q, Policy{Name: tc.policy}) {
				got = append(got, j.ID)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	tests := map[string]struct {
		nodes       []Node
		queue       []Job
		policy      string
		wantStarts  []string
		wantGPUs    map[string][]int // job -> GPU indexes (single-node jobs)
		wantReasons map[string]string
		wantMessage map[string]string
	}{
		"fills in priority order": {
			nodes:       []Node{node("n1", 8, "H100", 80)},
			queue:       []Job{job("low", 4, 1, 0), job("high", 4, 3, 1), job("normal", 2, 2, 2)},
			policy:      PolicyPriority,
			wantStarts:  []string{"high", "normal"},
			wantGPUs:    map[string][]int{"high": {0, 1, 2, 3}, "normal": {4, 5}},
			wantReasons: map[string]string{"low": ReasonResources},
			wantMessage: map[string]string{"low": "needs 4 GPUs on one node; the largest free block is 2 on n1"},
		},
		"head of line blocks later jobs": {
			nodes:       []Node{node("n1", 8, "H100", 80, 0, 1, 2)},
			queue:       []Job{job("big", 8, 2, 0), job("small", 1, 2, 1)},
			policy:      PolicyFCFS,
			wantStarts:  []string{},
			wantReasons: map[string]string{"big": ReasonResources, "small": ReasonBehindHead},
		},
		"gang never split across nodes": {
			nodes:       []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3), node("n2", 8, "H100", 80, 0, 1, 2, 3)},
			queue:       []Job{job("g", 8, 2, 0)},
			policy:      PolicyFCFS,
			wantStarts:  []string{},
			wantReasons: map[string]string{"g": ReasonResources},
			wantMessage: map[string]string{"g": "needs 8 GPUs on one node; the largest free block is 4 on n1"},
		},
		"best fit keeps the whole node free": {
			nodes:      []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1, 2, 3, 4, 5)},
			queue:      []Job{job("a", 2, 2, 0), job("b", 8, 2, 1)},
			policy:     PolicyFCFS,
			wantStarts: []string{"a", "b"},
			wantGPUs:   map[string][]int{"a": {6, 7}, "b": {0, 1, 2, 3, 4, 5, 6, 7}},
		},
		"gpu type and memory filter": {
			nodes: []Node{node("a100", 4, "NVIDIA A100-SXM4-40GB", 40), node("h100", 2, "NVIDIA H100 80GB HBM3", 80)},
			queue: []Job{
				{ID: "t", GPUs: 2, GPUType: "h100", SubmittedAt: t0},
				{ID: "m", GPUs: 1, MinMemoryMiB: 60 * 1024, SubmittedAt: t0.Add(time.Minute)},
			},
			policy:      PolicyFCFS,
			wantStarts:  []string{"t"},
			wantGPUs:    map[string][]int{"t": {0, 1}},
			wantReasons: map[string]string{"m": ReasonResources},
			wantMessage: map[string]string{"m": "needs 1 GPU with at least 60 GB each on one node; every such GPU is in use"},
		},
		"GPUs busy with processes Corral did not start are named": {
			nodes: []Node{func() Node {
				n := node("n1", 4, "H100", 80, 0, 1)
				n.GPUs[2].Free, n.GPUs[2].Foreign = false, true
				n.GPUs[3].Free, n.GPUs[3].Foreign = false, true
				return n
			}(), func() Node {
				n := node("n2", 2, "A100", 40)
				n.GPUs[0].Free, n.GPUs[0].Foreign = false, true // not an H100: not counted
				return n
			}()},
			queue:       []Job{{ID: "h", GPUs: 2, GPUType: "H100", SubmittedAt: t0}},
			policy:      PolicyFCFS,
			wantStarts:  []string{},
			wantReasons: map[string]string{"h": ReasonResources},
			wantMessage: map[string]string{
				"h": "needs 2 H100 GPUs on one node; every such GPU is in use (2 such GPUs run processes Corral did not start: corral nodes lists them)",
			},
		},
		"a GPU busy with a process Corral did not start is named": {
			nodes: []Node{func() Node {
				n := node("n2", 2, "A100", 40)
				n.GPUs[0].Free, n.GPUs[0].Foreign = false, true
				return n
			}()},
			queue:       []Job{{ID: "one", GPUs: 2, SubmittedAt: t0}},
			policy:      PolicyFCFS,
			wantStarts:  []string{},
			wantReasons: map[string]string{"one": ReasonResources},
			wantMessage: map[string]string{
				"one": "needs 2 GPUs on one node; the largest free block is 1 on n2 (1 such GPU runs processes Corral did not start: corral nodes lists them)",
			},
		},
		"unsatisfiable does not block": {
			nodes:       []Node{node("n1", 4, "H100", 80)},
			queue:       []Job{job("huge", 16, 4, 0), job("ok", 1, 1, 1)},
			policy:      PolicyPriority,
			wantStarts:  []string{"ok"},
			wantReasons: map[string]string{"huge": ReasonUnsatisfiable},
		},
		"cordoned node takes nothing": {
			nodes:       []Node{{ID: "n1", Schedulable: false, GPUs: node("x", 2, "H100", 80).GPUs}},
			queue:       []Job{job("a", 1, 2, 0)},
			policy:      PolicyFCFS,
			wantStarts:  []string{},
			wantMessage: map[string]string{"a": "no node accepts new jobs (all are cordoned, draining or down)"},
		},
		"a node whose log disk is full takes nothing, and says why": {
			nodes: []Node{
				{ID: "n1", Schedulable: false, DiskFull: "its log disk (/d) has 1.0% free, under --min-free-disk 5%", GPUs: node("x", 2, "H100", 80).GPUs},
				{ID: "n2", Schedulable: false, GPUs: node("x", 2, "H100", 80).GPUs},
			},
			queue:       []Job{job("a", 1, 2, 0)},
			policy:      PolicyFCFS,
			wantStarts:  []string{},
			wantReasons: map[string]string{"a": ReasonNodeDiskFull},
			wantMessage: map[string]string{"a": "no node accepts new jobs: node n1 takes none while its log disk (/d) has 1.0% free, under --min-free-disk 5%"},
		},
		"a full disk elsewhere does not hide free GPUs": {
			nodes:      []Node{{ID: "n1", Schedulable: false, DiskFull: "its log disk is full", GPUs: node("x", 2, "H100", 80).GPUs}, node("n2", 2, "H100", 80)},
			queue:      []Job{job("a", 1, 2, 0)},
			policy:     PolicyFCFS,
			wantStarts: []string{"a"},
			wantGPUs:   map[string][]int{"a": {0}},
		},
		"multi-node gang": {
			nodes:      []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0), node("n3", 8, "H100", 80)},
			queue:      []Job{{ID: "g", GPUs: 8, Nodes: 2, SubmittedAt: t0}},
			policy:     PolicyFCFS,
			wantStarts: []string{"g"},
		},
		"zero-GPU job runs anywhere": {
			nodes:      []Node{node("n1", 1, "H100", 80, 0)},
			queue:      []Job{job("cpu", 0, 2, 0)},
			policy:     PolicyFCFS,
			wantStarts: []string{"cpu"},
			wantGPUs:   map[string][]int{"cpu": {}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: t0, Nodes: tc.nodes, Queue: tc.queue, Policy: Policy{Name: tc.policy}})
			if got := startIDs(r); !reflect.DeepEqual(got, tc.wantStarts) {
				t.Fatalf("starts = %v, want %v", got, tc.wantStarts)
			}
			for _, s := range r.Starts {
				if want, ok := tc.wantGPUs[s.JobID]; ok && !reflect.DeepEqual(s.Placements[0].GPUs, want) {
					t.Errorf("%s GPUs = %v, want %v", s.JobID, s.Placements[0].GPUs, want)
				}
			}
			if len(r.Starts)+len(r.Pending) != len(tc.queue) {
				t.Fatalf("%d starts + %d pending != %d queued", len(r.Starts), len(r.Pending), len(tc.queue))
			}
			for _, p := range r.Pending {
				if want, ok := tc.wantReasons[p.JobID]; ok && p.Reason != want {
					t.Errorf("%s reason = %q, want %q", p.JobID, p.Reason, want)
				}
				if want, ok := tc.wantMessage[p.JobID]; ok && p.Message() != want {
					t.Errorf("%s message = %q, want %q", p.JobID, p.Message(), want)
				}
			}
		})
	}
}

func TestMultiNodeGangUsesDistinctFullNodes(t *testing.T) {
	r := Schedule(Snapshot{Nodes: []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0), node("n3", 8, "H100", 80)},
		Queue: []Job{{ID: "g", GPUs: 8, Nodes: 2}}})
	if len(r.Starts) != 1 {
		t.Fatalf("gang not started: %+v", r.Pending)
	}
	ps := r.Starts[0].Placements
	if len(ps) != 2 || ps[0].NodeID != "n1" || ps[1].NodeID != "n3" {
		t.Fatalf("placements = %+v, want n1 and n3", ps)
	}
}

// benchSnapshot: 1,000 nodes x 8 GPUs, half of them busy with running
// jobs, and a queue of `queued` jobs asking 1-8 GPUs from 8 users.
func benchSnapshot(queued int, policy Policy) Snapshot {
	now := t0.Add(24 * time.Hour)
	var nodes []Node
	var running []Running
	for n := range 1000 {
		id := fmt.Sprintf("node-%04d", n)
		nd := node(id, 8, "H100", 80)
		if n%2 == 0 {
			for g := range 8 {
				nd.GPUs[g].Free = false
				running = append(running, Running{ID: fmt.Sprintf("r%d-%d", n, g), User: fmt.Sprintf("user%d", g), Project: "p",
					Priority: 1 + g%4, StartedAt: now.Add(-time.Duration(n%90) * time.Minute), Estimate: 2 * time.Hour,
					Placements: []Placement{{NodeID: id, GPUs: []int{g}}}})
			}
		}
		nodes = append(nodes, nd)
	}
	var queue []Job
	for i := range queued {
		queue = append(queue, Job{ID: fmt.Sprintf("j%05d", i), User: fmt.Sprintf("user%d", i%8), Project: "p", Priority: 1 + i%4,
			GPUs: 1 + i%8, SubmittedAt: now.Add(-time.Duration(i) * time.Second), Estimate: time.Hour, EstimateGiven: i%2 == 0})
	}
	return Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue, Policy: policy}
}

// BenchmarkCycle is one full cycle with 10,000 queued jobs on 1,000 nodes
// x 8 GPUs, per policy, backfill and preemption on.
func BenchmarkCycle(b *testing.B) {
	for _, name := range Policies() {
		b.Run(name, func(b *testing.B) {
			s := benchSnapshot(10000, Policy{Name: name, Backfill: true, Preemption: true, MinRunTime: 10 * time.Minute})
			b.ReportAllocs()
			for b.Loop() {
				Schedule(s)
			}
		})
	}
}

// BenchmarkPlacements: 8,000 one-GPU jobs placed on an empty cluster of
// 1,000 x 8; reports placements per second.
func BenchmarkPlacements(b *testing.B) {
	s := benchSnapshot(0, Policy{Name: PolicyFCFS, Backfill: true})
	s.Running = nil
	for n := range s.Nodes {
		for g := range s.Nodes[n].GPUs {
			s.Nodes[n].GPUs[g].Free = true
		}
	}
	for i := range 8000 {
		s.Queue = append(s.Queue, Job{ID: fmt.Sprintf("j%05d", i), User: "u", GPUs: 1, SubmittedAt: t0.Add(time.Duration(i)), Estimate: time.Hour})
	}
	placed := 0
	for b.Loop() {
		placed += len(Schedule(s).Starts)
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
}

// BenchmarkEstimateStarts plans the first DefaultPlanDepth waiting jobs.
func BenchmarkEstimateStarts(b *testing.B) {
	s := benchSnapshot(10000, Policy{Name: PolicyFairShare, Backfill: true})
	r := Schedule(s)
	for b.Loop() {
		EstimateStarts(s, r, DefaultPlanDepth)
	}
}
