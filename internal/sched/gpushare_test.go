package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// migGPU makes GPU idx of n a MIG GPU with the given profiles (all free),
// 7 compute slices in all.
func migGPU(n *Node, idx int, profiles ...string) {
	g := &n.GPUs[idx]
	g.Free, g.MIGSlices = false, 7
	for i, p := range profiles {
		var cs int
		var gb int64
		if _, err := fmt.Sscanf(p, "%dg.%dgb", &cs, &gb); err != nil {
			panic(err)
		}
		g.MIG = append(g.MIG, Slice{Index: i, Profile: p, MemoryMiB: gb * 1024, ComputeSlices: cs, Free: true})
	}
}

func sliceJob(id, profile string, minGB int64) Job {
	return Job{ID: id, User: "u", GPUs: 1, MIGProfile: profile, MinMemoryMiB: minGB * 1024, SubmittedAt: t0}
}

func shareJob(id, user string, gb int64, compute int) Job {
	return Job{ID: id, User: user, GPUs: 1, ShareMiB: gb * 1024, ShareCompute: compute, SubmittedAt: t0}
}

type unit struct {
	node     string
	gpu, mig int
}

// placed lists the units each start got: a slice (mig >= 0), a share or
// a whole GPU (mig -1).
func placed(t *testing.T, r Result) map[string][]unit {
	t.Helper()
	out := map[string][]unit{}
	for _, s := range r.Starts {
		for _, p := range s.Placements {
			for _, g := range p.GPUs {
				u := unit{node: p.NodeID, gpu: g, mig: -1}
				if p.Part != nil {
					u.mig = p.Part.MIG
				}
				out[s.JobID] = append(out[s.JobID], u)
			}
		}
	}
	return out
}

func TestPlaceSlices(t *testing.T) {
	mixed := func() []Node {
		n := node("n1", 4, "H100", 80)
		migGPU(&n, 0, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb")
		migGPU(&n, 1, "3g.40gb", "4g.40gb")
		return []Node{n}
	}
	tests := map[string]struct {
		queue []Job
		busy  func(ns []Node) // slices already held
		want  map[string]unit // job -> unit; absent: it waits
		why   map[string]string
	}{
		"exact profile": {
			queue: []Job{sliceJob("a", "4g.40gb", 0)},
			want:  map[string]unit{"a": {"n1", 1, 1}},
		},
		"any: the smallest that fits": {
			queue: []Job{sliceJob("a", MIGAny, 0), sliceJob("b", MIGAny, 20)},
			want:  map[string]unit{"a": {"n1", 0, 0}, "b": {"n1", 1, 0}},
		},
		"any: ties by fewer compute slices": {
			queue: []Job{sliceJob("a", MIGAny, 35)},
			want:  map[string]unit{"a": {"n1", 1, 0}},
		},
		"exact: on the GPU already busy first": {
			queue: []Job{sliceJob("a", "3g.40gb", 0)},
			busy:  func(ns []Node) { ns[0].GPUs[1].MIG[1].Free = false },
			want:  map[string]unit{"a": {"n1", 1, 0}},
		},
		"no slice given twice": {
			queue: []Job{sliceJob("a", "3g.40gb", 0), sliceJob("b", "3g.40gb", 0), sliceJob("c", "3g.40gb", 0)},
			busy:  func(ns []Node) { ns[0].GPUs[1].MIG[0].Free, ns[0].GPUs[1].MIG[0].Holder = false, "12" },
			want:  map[string]unit{"a": {"n1", 0, 4}},
			why: map[string]string{
				"b": "needs a free 3g.40gb MIG slice; the 2 on n1 are held by a, 12",
			},
		},
		"whole jobs never on a MIG GPU": {
			queue: []Job{job("w1", 1, 1, 0), job("w2", 1, 1, 1), job("w3", 1, 1, 2)},
			want:  map[string]unit{"w1": {"n1", 2, -1}, "w2": {"n1", 3, -1}},
		},
		"no such profile: unsatisfiable": {
			queue: []Job{sliceJob("a", "7g.80gb", 0)},
			why:   map[string]string{"a": "no node could ever run it: it needs a free 7g.80gb MIG slice and no GPU offers one"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := mixed()
			if tc.busy != nil {
				tc.busy(ns)
			}
			r := Schedule(Snapshot{Now: t0, Nodes: ns, Queue: tc.queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
			got := placed(t, r)
			seen := map[unit]string{}
			for id, us := range got {
				for _, u := range us {
					if other, dup := seen[u]; dup {
						t.Fatalf("%v given to %s and %s", u, other, id)
					}
					seen[u] = id
					if u.mig < 0 && ns[0].GPUs[u.gpu].MIG != nil {
						t.Fatalf("whole-GPU job %s on MIG GPU %d", id, u.gpu)
					}
				}
			}
			for id, u := range tc.want {
				if len(got[id]) != 1 || got[id][0] != u {
					t.Errorf("%s got %v, want %v", id, got[id], u)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("starts %v, want %v", got, tc.want)
			}
			for _, p := range r.Pending {
				if w, ok := tc.why[p.JobID]; ok && p.Message() != w {
					t.Errorf("%s: why %q, want %q", p.JobID, p.Message(), w)
				}
			}
		})
	}
}

func TestPlaceShares(t *testing.T) {
	shared := func() []Node {
		n := node("n1", 3, "H100", 80)
		n.GPUs[0].Share = &Share{}
		n.GPUs[1].Share = &Share{}
		return []Node{n}
	}
	tests := map[string]struct {
		queue []Job
		prep  func(ns []Node)
		want  map[string]int // job -> GPU index; absent: waits
		why   map[string]string
	}{
		"packs onto the fullest that fits": {
			queue: []Job{shareJob("a", "u", 20, 0), shareJob("b", "u", 20, 0), shareJob("c", "u", 40, 0)},
			want:  map[string]int{"a": 0, "b": 0, "c": 0},
		},
		"never over-commits memory": {
			queue: []Job{shareJob("a", "u", 50, 0), shareJob("b", "u", 40, 0)},
			want:  map[string]int{"a": 0, "b": 1},
		},
		"never over-commits compute": {
			queue: []Job{shareJob("a", "u", 10, 60), shareJob("b", "u", 10, 50), shareJob("c", "u", 10, 40)},
			want:  map[string]int{"a": 0, "b": 1, "c": 0},
		},
		"different users never share": {
			queue: []Job{shareJob("a", "ann", 10, 0), shareJob("b", "bob", 10, 0), shareJob("c", "cat", 10, 0)},
			want:  map[string]int{"a": 0, "b": 1},
			why:   map[string]string{"c": "needs 10 GB on a shared GPU; the 2 that could hold it (on n1) are held by a, b (or another user's shares, or a whole-GPU job)"},
		},
		"one user waiting keeps no other out": {
			queue: []Job{shareJob("a", "ann", 10, 0), shareJob("b", "bob", 10, 0), shareJob("c", "cat", 10, 0), shareJob("d", "ann", 60, 0), shareJob("e", "cat", 10, 0)},
			want:  map[string]int{"a": 0, "b": 1, "d": 0},
		},
		"a running share keeps other users off": {
			queue: []Job{shareJob("a", "bob", 10, 0), shareJob("b", "ann", 10, 0)},
			prep: func(ns []Node) {
				ns[0].GPUs[0].Free = false
				ns[0].GPUs[0].Share = &Share{UsedMiB: 10 << 10, User: "ann", Holders: []string{"r"}}
			},
			want: map[string]int{"a": 1, "b": 0},
		},
		"a whole job's shared GPU takes no share": {
			queue: []Job{shareJob("a", "u", 10, 0)},
			prep:  func(ns []Node) { ns[0].GPUs[0].Free, ns[0].GPUs[1].Free = false, false },
			why:   map[string]string{"a": "needs 10 GB on a shared GPU; the 2 that could hold it (on n1) are in use or on nodes that take no new jobs"},
		},
		"a whole job never takes a GPU a share took this cycle": {
			queue: []Job{shareJob("a", "u", 10, 0), job("w", 2, 1, 1)},
			prep:  func(ns []Node) { ns[0].GPUs[1].Free = false },
			want:  map[string]int{"a": 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := shared()
			if tc.prep != nil {
				tc.prep(ns)
			}
			r := Schedule(Snapshot{Now: t0, Nodes: ns, Queue: tc.queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
			got := placed(t, r)
			if len(got) != len(tc.want) {
				t.Fatalf("starts %v, want %v", got, tc.want)
			}
			mem, compute := map[int]int64{}, map[int]int{}
			for _, s := range r.Starts {
				p := s.Placements[0]
				if p.Part == nil {
					t.Fatalf("%s started whole: %+v", s.JobID, p)
				}
				mem[p.GPUs[0]] += p.Part.ShareMiB
				compute[p.GPUs[0]] += p.Part.ShareCompute
			}
			for g := range mem {
				if mem[g] > 80<<10 || compute[g] > 100 {
					t.Errorf("GPU %d over-committed: %d MiB, %d%%", g, mem[g], compute[g])
				}
			}
			for id, g := range tc.want {
				if got[id][0].gpu != g {
					t.Errorf("%s on GPU %d, want %d", id, got[id][0].gpu, g)
				}
			}
			for _, p := range r.Pending {
				if w, ok := tc.why[p.JobID]; ok && p.Message() != w {
					t.Errorf("%s: why %q, want %q", p.JobID, p.Message(), w)
				}
			}
		})
	}
}

// Running slices and shares are never preemption victims, and a whole
// job's reservation never counts on a MIG GPU.
func TestPartsNotVictims(t *testing.T) {
	n := node("n1", 2, "H100", 80)
	migGPU(&n, 0, "3g.40gb", "4g.40gb")
	n.GPUs[0].MIG[0].Free = false
	n.GPUs[1].Free = false
	running := []Running{
		{ID: "s", User: "u", Priority: 1, StartedAt: t0.Add(-time.Hour), Estimate: time.Hour,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{0}, Part: &Part{MIG: 0, Profile: "3g.40gb", Fraction: 3.0 / 7}}}},
		{ID: "w", User: "u", Priority: 1, StartedAt: t0.Add(-time.Hour), Estimate: 2 * time.Hour,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{1}}}},
	}
	r := Schedule(Snapshot{Now: t0, Nodes: []Node{n}, Running: running,
		Queue:  []Job{{ID: "hi", User: "v", Priority: 4, GPUs: 2, SubmittedAt: t0}},
		Policy: Policy{Name: PolicyPriority, Preemption: true, Backfill: true}})
	for _, p := range r.Preemptions {
		if p.JobID == "s" {
			t.Fatalf("a slice job was preempted for a whole-GPU job: %+v", r.Preemptions)
		}
	}
	if len(r.Starts) != 0 {
		t.Fatalf("starts %+v", r.Starts)
	}
	for _, h := range r.Held {
		for _, g := range h.GPUs {
			if g == 0 {
				t.Fatalf("reservation holds the MIG GPU: %+v", r.Held)
			}
		}
	}
}

func TestGPUEquivalents(t *testing.T) {
	tests := map[string]struct {
		ps   []Placement
		want float64
	}{
		"whole GPUs":              {ps: []Placement{{GPUs: []int{0, 1}}}, want: 2},
		"1g.10gb of an H100":      {ps: []Placement{{GPUs: []int{0}, Part: &Part{Fraction: SliceFraction(1, 7)}}}, want: 1.0 / 7},
		"3g.40gb of an H100":      {ps: []Placement{{GPUs: []int{0}, Part: &Part{Fraction: SliceFraction(3, 7)}}}, want: 3.0 / 7},
		"20 GB of 80":             {ps: []Placement{{GPUs: []int{0}, Part: &Part{Fraction: ShareFraction(20<<10, 80<<10, 0)}}}, want: 0.25},
		"20 GB, 50% compute":      {ps: []Placement{{GPUs: []int{0}, Part: &Part{Fraction: ShareFraction(20<<10, 80<<10, 50)}}}, want: 0.5},
		"unknown total slices: 7": {ps: []Placement{{GPUs: []int{0}, Part: &Part{Fraction: SliceFraction(2, 0)}}}, want: 2.0 / 7},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Equivalents(tc.ps); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("got %g, want %g", got, tc.want)
			}
		})
	}
	// Fair share charges running parts by their fraction.
	u := Usage{Users: map[string]float64{}, Projects: map[string]float64{}}
	ChargeRunning(u, []Running{{User: "a", Project: "p", StartedAt: t0.Add(-7 * time.Second),
		Placements: []Placement{{NodeID: "n", GPUs: []int{0}, Part: &Part{Fraction: 1.0 / 7}}}}}, t0)
	if math.Abs(u.Users["a"]-1) > 1e-9 {
		t.Fatalf("7 s of a 1/7 slice charged %g GPU-seconds, want 1", u.Users["a"])
	}
	// A started slice carries its fraction from the GPU's total.
	n := node("n1", 1, "H100", 80)
	migGPU(&n, 0, "1g.10gb")
	r := Schedule(Snapshot{Now: t0, Nodes: []Node{n}, Queue: []Job{sliceJob("a", "1g.10gb", 0)}, Policy: Policy{Name: PolicyFCFS}})
	if len(r.Starts) != 1 || !strings.HasPrefix(fmt.Sprint(r.Starts[0].Placements[0].Part.Fraction), "0.142857") {
		t.Fatalf("starts %+v", r.Starts)
	}
}

// A whole-GPU job that only the MIG GPUs could hold can never run: it is
// unsatisfiable, not waiting for GPUs that are never free.
func TestWholeJobNeverFitsMIGGPUs(t *testing.T) {
	n := node("n1", 4, "H100", 80)
	migGPU(&n, 0, "7g.80gb")
	migGPU(&n, 1, "7g.80gb")
	tests := map[string]struct {
		gpus   int
		labels map[string]string
		want   string
	}{
		"two fit":              {gpus: 2, want: ""},
		"three never":          {gpus: 3, want: ReasonUnsatisfiable},
		"three never, labeled": {gpus: 3, labels: map[string]string{"a": "b"}, want: ReasonUnsatisfiable},
		"two, labeled, fit":    {gpus: 2, labels: map[string]string{"a": "b"}, want: ""},
	}
	n.Labels = map[string]string{"a": "b"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := job("w", tc.gpus, 2, 0)
			j.NodeLabels = tc.labels
			r := Schedule(Snapshot{Now: t0, Nodes: []Node{n}, Queue: []Job{j}, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
			got := ""
			if len(r.Pending) > 0 {
				got = r.Pending[0].Reason
			}
			if got != tc.want {
				t.Fatalf("reason %q, want %q (starts %+v)", got, tc.want, r.Starts)
			}
			for _, s := range r.Starts {
				for _, g := range s.Placements[0].GPUs {
					if g < 2 {
						t.Fatalf("placed on MIG GPU %d", g)
					}
				}
			}
		})
	}
}

// BenchmarkCycleParts: 1,000 nodes x 8 GPUs, GPUs 0-3 of each in seven
// 1g.10gb slices and GPUs 4-5 shared; 10,000 queued jobs, a third
// slices, a third shares, a third whole GPUs (most of them wait).
// partsSnapshot is nodes nodes of 8 GPUs, 4 of each in seven 1g.10gb
// slices and 2 shared, and 10,000 queued jobs: slices, shares and whole.
func partsSnapshot(nodeCount int) Snapshot {
	var nodes []Node
	for n := range nodeCount {
		nd := node(fmt.Sprintf("node-%04d", n), 8, "H100", 80)
		for g := range 4 {
			migGPU(&nd, g, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb")
		}
		nd.GPUs[4].Share, nd.GPUs[5].Share = &Share{}, &Share{}
		nodes = append(nodes, nd)
	}
	var queue []Job
	for i := range 10000 {
		var j Job
		switch i % 3 {
		case 0:
			j = sliceJob(fmt.Sprintf("s%05d", i), "1g.10gb", 0)
		case 1:
			j = shareJob(fmt.Sprintf("m%05d", i), fmt.Sprintf("user%d", i%8), 10, 10)
		default:
			j = job(fmt.Sprintf("w%05d", i), 1+i%4, 1+i%4, i)
		}
		j.User, j.SubmittedAt, j.Estimate = fmt.Sprintf("user%d", i%8), t0.Add(time.Duration(i)*time.Second), time.Hour
		queue = append(queue, j)
	}
	return Snapshot{Now: t0.Add(24 * time.Hour), Nodes: nodes, Queue: queue, Policy: Policy{Name: PolicyFairShare, Backfill: true}}
}

func BenchmarkCycleParts(b *testing.B) {
	s := partsSnapshot(1000)
	b.ReportAllocs()
	for b.Loop() {
		Schedule(s)
	}
}

// BenchmarkEstimateStartsParts: the start plan after a cycle of
// BenchmarkCycleParts's slices and shares (6,667) on 100 of its nodes:
// the parts are full, and the 500 waiting jobs planned are slices and
// shares (the parts' plan, plan_parts.go).
func BenchmarkEstimateStartsParts(b *testing.B) {
	s := partsSnapshot(100)
	parts := s.Queue[:0]
	for _, j := range s.Queue {
		if j.Fractional() {
			parts = append(parts, j)
		}
	}
	s.Queue = parts
	r := Schedule(s)
	b.ReportAllocs()
	for b.Loop() {
		EstimateStarts(s, r, DefaultPlanDepth)
	}
}

// Why a slice or share job waits agrees in number with the parts it names.
func TestPartWhyNumber(t *testing.T) {
	oneShared := func(busy bool) []Node {
		n := node("n1", 2, "H100", 80)
		n.GPUs[0].Share = &Share{}
		n.GPUs[0].Free = !busy
		return []Node{n}
	}
	oneSlice := func() []Node {
		n := node("n1", 1, "H100", 80)
		migGPU(&n, 0, "3g.40gb", "4g.40gb")
		return []Node{n}
	}
	tests := map[string]struct {
		nodes []Node
		queue []Job
		id    string
		want  string
	}{
		"one slice, held": {
			nodes: oneSlice(), queue: []Job{sliceJob("a", "4g.40gb", 0), sliceJob("b", "4g.40gb", 0)}, id: "b",
			want: "needs a free 4g.40gb MIG slice; the 1 on n1 is held by a",
		},
		"two slices, held": {
			nodes: oneSlice(), queue: []Job{sliceJob("a", MIGAny, 30), sliceJob("b", MIGAny, 30), sliceJob("c", MIGAny, 30)}, id: "c",
			want: "needs a free MIG slice with at least 30 GB; the 2 on n1 are held by a, b",
		},
		"one shared GPU, held": {
			nodes: oneShared(false), queue: []Job{shareJob("a", "ann", 10, 0), shareJob("b", "bob", 10, 0)}, id: "b",
			want: "needs 10 GB on a shared GPU; the 1 that could hold it (on n1) is held by a (or another user's shares, or a whole-GPU job)",
		},
		"one shared GPU, in use": {
			nodes: oneShared(true), queue: []Job{shareJob("a", "ann", 10, 0)}, id: "a",
			want: "needs 10 GB on a shared GPU; the 1 that could hold it (on n1) is in use or on a node that takes no new jobs",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: t0, Nodes: tc.nodes, Queue: tc.queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
			for _, p := range r.Pending {
				if p.JobID == tc.id {
					if p.Message() != tc.want {
						t.Fatalf("why %q, want %q", p.Message(), tc.want)
					}
					return
				}
			}
			t.Fatalf("%s not pending: %+v", tc.id, r)
		})
	}
}

// Whole-GPU jobs take plain GPUs before shared ones: a node where they fit
// on plain GPUs comes first, then plain GPUs within the node; a shared GPU
// only when nothing else fits.
func TestWholeJobsAvoidSharedGPUs(t *testing.T) {
	sharedNode := func(id string, n int, shared []int, busy ...int) Node {
		nd := node(id, n, "H100", 80, busy...)
		for _, g := range shared {
			nd.GPUs[g].Share = &Share{}
		}
		return nd
	}
	tests := map[string]struct {
		nodes []Node
		job   Job
		want  []unit // in node then GPU order
	}{
		"plain GPUs of the node first": {
			nodes: []Node{sharedNode("n1", 4, []int{0, 1})},
			job:   job("w", 2, 1, 0),
			want:  []unit{{"n1", 2, -1}, {"n1", 3, -1}},
		},
		"a shared GPU last, when the plain ones are too few": {
			nodes: []Node{sharedNode("n1", 4, []int{0, 1})},
			job:   job("w", 3, 1, 0),
			want:  []unit{{"n1", 0, -1}, {"n1", 2, -1}, {"n1", 3, -1}},
		},
		"an emptier plain node before a fuller shared one": {
			nodes: []Node{sharedNode("n1", 2, []int{0}, 1), sharedNode("n2", 2, nil)},
			job:   job("w", 1, 1, 0),
			want:  []unit{{"n2", 0, -1}},
		},
		"a shared GPU when nothing else fits": {
			nodes: []Node{sharedNode("n1", 2, []int{0, 1}), sharedNode("n2", 2, nil, 0, 1)},
			job:   job("w", 1, 1, 0),
			want:  []unit{{"n1", 0, -1}},
		},
		"a gang takes the plain nodes": {
			nodes: []Node{sharedNode("n1", 2, []int{0}), sharedNode("n2", 2, nil), sharedNode("n3", 2, nil)},
			job:   Job{ID: "w", User: "u", GPUs: 2, Nodes: 2, SubmittedAt: t0},
			want:  []unit{{"n2", 0, -1}, {"n2", 1, -1}, {"n3", 0, -1}, {"n3", 1, -1}},
		},
		"a gang takes a shared node when the plain ones are too few": {
			nodes: []Node{sharedNode("n1", 2, []int{1}), sharedNode("n2", 2, nil)},
			job:   Job{ID: "w", User: "u", GPUs: 2, Nodes: 2, SubmittedAt: t0},
			want:  []unit{{"n1", 0, -1}, {"n1", 1, -1}, {"n2", 0, -1}, {"n2", 1, -1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: t0, Nodes: tc.nodes, Queue: []Job{tc.job}, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
			got := placed(t, r)["w"]
			slices.SortFunc(got, func(a, b unit) int { return cmp.Or(strings.Compare(a.node, b.node), a.gpu-b.gpu) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("placed on %v, want %v", got, tc.want)
			}
		})
	}
}

// Fair share's in-cycle ranking charges a running or just placed slice or
// share its fraction of the GPU, as the usage ledger does: a user holding
// a 1g.10gb slice (1/7) ranks ahead of one holding a 40 GB share (1/2).
func TestFairShareChargesFractions(t *testing.T) {
	slice := func(id, user string, mig int) Running {
		return Running{ID: id, User: user, Priority: 1, StartedAt: t0.Add(-time.Hour),
			Placements: []Placement{{NodeID: "n1", GPUs: []int{0}, Part: &Part{MIG: mig, Profile: "1g.10gb", Fraction: 1.0 / 7}}}}
	}
	bobShare := Running{ID: "bs", User: "bob", Priority: 1, StartedAt: t0.Add(-time.Hour),
		Placements: []Placement{{NodeID: "n1", GPUs: []int{1}, Part: &Part{MIG: -1, ShareMiB: 40 << 10, Fraction: 0.5}}}}
	whole := func(id, user string) Job { j := job(id, 1, 1, 1); j.User = user; return j } // after the slice job
	zedSlice := sliceJob("zs", "1g.10gb", 0)
	zedSlice.User, zedSlice.Priority = "zed", 1
	tests := map[string]struct {
		running []Running
		queue   []Job
		want    string // the job that gets the one free whole GPU
	}{
		"a running slice counts its fraction": {
			running: []Running{slice("r", "zed", 0), bobShare},
			queue:   []Job{whole("b", "bob"), whole("z", "zed")},
			want:    "z",
		},
		"a slice placed in the cycle counts its fraction": {
			running: []Running{bobShare},
			queue:   []Job{zedSlice, whole("b", "bob"), whole("z", "zed")},
			want:    "z",
		},
		"whole GPUs still count whole": {
			running: []Running{slice("r1", "zed", 0), slice("r2", "zed", 1), slice("r3", "zed", 2), slice("r4", "zed", 3), bobShare},
			queue:   []Job{whole("b", "bob"), whole("z", "zed")},
			want:    "b",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1", 3, "H100", 80)
			migGPU(&n, 0, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb")
			n.GPUs[1].Free, n.GPUs[1].Share = false, &Share{UsedMiB: 40 << 10, User: "bob", Holders: []string{"bs"}}
			for _, r := range tc.running {
				if p := r.Placements[0]; p.GPUs[0] == 0 {
					n.GPUs[0].MIG[p.Part.MIG].Free = false
				}
			}
			r := Schedule(Snapshot{Now: t0, Nodes: []Node{n}, Running: tc.running, Queue: tc.queue,
				Policy: Policy{Name: PolicyFairShare, Backfill: true}})
			got := ""
			for id, us := range placed(t, r) {
				if us[0].gpu == 2 {
					got = id
				}
			}
			if got != tc.want {
				t.Errorf("the whole GPU went to %q, want %q (starts %v, pending %v)", got, tc.want, startIDs(r), r.Pending)
			}
		})
	}
}
