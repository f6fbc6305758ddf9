package gpubook

import (
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/sched"
)

// book is a one-node cluster: GPU 0 and 1 whole, GPU 2 in MIG mode with
// two 3g.40gb slices, GPU 3 shared through MPS.
func book() *Book {
	b := New()
	mig := &api.MIG{Mode: api.MIGEnabled, ComputeSlices: 7, Devices: []api.MIGDevice{
		{Index: 0, UUID: "MIG-a", Profile: "3g.40gb", MemoryTotal: 40960, ComputeSlices: 3},
		{Index: 1, UUID: "MIG-b", Profile: "3g.40gb", MemoryTotal: 40960, ComputeSlices: 3},
	}}
	b.Nodes().Add(nodebook.Node{ID: "n1", Devices: []gpuinfo.Device{
		{Index: 0, UUID: "GPU-0", MemoryMiB: 81920},
		{Index: 1, UUID: "GPU-1", MemoryMiB: 81920},
		{Index: 2, UUID: "GPU-2", MemoryMiB: 81920, MIG: mig},
		{Index: 3, UUID: "GPU-3", MemoryMiB: 81920, Shared: true},
	}})
	return b
}

func whole(gpus ...int) []sched.Placement { return []sched.Placement{{NodeID: "n1", GPUs: gpus}} }

func slice(mig int) []sched.Placement {
	return []sched.Placement{{NodeID: "n1", GPUs: []int{2}, Part: &sched.Part{MIG: mig, Profile: "3g.40gb", Fraction: 3.0 / 7}}}
}

func share(mib int64, compute int) []sched.Placement {
	return []sched.Placement{{NodeID: "n1", GPUs: []int{3}, Part: &sched.Part{MIG: -1, ShareMiB: mib, ShareCompute: compute, Fraction: 0.5}}}
}

// free says, per GPU of the snapshot's one node, whether it is free;
// then whether each slice of GPU 2 is, and the share holders of GPU 3.
func free(t *testing.T, b *Book, jobs Jobs) (gpus, slices []bool, shares []string) {
	t.Helper()
	ns := b.Snapshot(jobs)
	if len(ns) != 1 || len(ns[0].GPUs) != 4 {
		t.Fatalf("snapshot: %+v", ns)
	}
	for _, g := range ns[0].GPUs {
		gpus = append(gpus, g.Free)
	}
	for _, s := range ns[0].GPUs[2].MIG {
		slices = append(slices, s.Free)
	}
	if sh := ns[0].GPUs[3].Share; sh != nil {
		shares = sh.Holders
	}
	return gpus, slices, shares
}

func noJobs(string) *api.Job { return nil }

func TestAllocateThenRelease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ps     []sched.Placement
		want   []api.Allocation // the allocation, UUIDs and parts
		gpus   []bool           // free while held
		slices []bool
		shares []string
	}{
		{"whole GPUs", whole(0, 1),
			[]api.Allocation{{NodeID: "n1", GPUID: 0, GPUUUID: "GPU-0", MemoryGB: 80}, {NodeID: "n1", GPUID: 1, GPUUUID: "GPU-1", MemoryGB: 80}},
			[]bool{false, false, false, true}, []bool{true, true}, nil},
		{"a MIG slice", slice(1),
			[]api.Allocation{{NodeID: "n1", GPUID: 2, GPUUUID: "GPU-2", MemoryGB: 40, Fraction: 3.0 / 7,
				MIG: &api.AllocatedSlice{Index: 1, Profile: "3g.40gb", UUID: "MIG-b"}}},
			[]bool{true, true, false, true}, []bool{true, false}, nil},
		{"an MPS share", share(4096, 50),
			[]api.Allocation{{NodeID: "n1", GPUID: 3, GPUUUID: "GPU-3", MemoryGB: 4, Fraction: 0.5, ShareMiB: 4096, ShareCompute: 50}},
			[]bool{true, true, false, false}, []bool{true, true}, []string{"j1"}},
		{"a GPU the nodes do not list", []sched.Placement{{NodeID: "n2", GPUs: []int{0}}},
			[]api.Allocation{}, []bool{true, true, false, true}, []bool{true, true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := book()
			before, beforeSlices, _ := free(t, b, noJobs)
			got := b.Allocate("j1", "ana", tc.ps)
			if !equalAllocations(got, tc.want) {
				t.Fatalf("allocation %+v, want %+v", got, tc.want)
			}
			gpus, sl, sh := free(t, b, noJobs)
			if !slices.Equal(gpus, tc.gpus) || !slices.Equal(sl, tc.slices) || !slices.Equal(sh, tc.shares) {
				t.Errorf("held: free GPUs %v slices %v shares %v, want %v %v %v", gpus, sl, sh, tc.gpus, tc.slices, tc.shares)
			}
			b.Release("j2", got) // another holder's release frees nothing of j1's
			if g, s, _ := free(t, b, noJobs); !slices.Equal(g, tc.gpus) || !slices.Equal(s, tc.slices) {
				t.Errorf("after another's release: free GPUs %v slices %v, want %v %v", g, s, tc.gpus, tc.slices)
			}
			b.Release("j1", got)
			gpus, sl, sh = free(t, b, noJobs)
			if !slices.Equal(gpus, before) || !slices.Equal(sl, beforeSlices) || sh != nil {
				t.Errorf("released: free GPUs %v slices %v shares %v, want %v %v none", gpus, sl, sh, before, beforeSlices)
			}
			if o := b.Owner("n1", 0); o != "" {
				t.Errorf("GPU 0 still owned by %q", o)
			}
		})
	}
}

func equalAllocations(a, b []api.Allocation) bool {
	return slices.EqualFunc(a, b, func(x, y api.Allocation) bool {
		sameSlice := (x.MIG == nil) == (y.MIG == nil) && (x.MIG == nil || *x.MIG == *y.MIG)
		x.MIG, y.MIG = nil, nil
		return sameSlice && x == y
	})
}

func TestSnapshotMarksOwnedAndForeign(t *testing.T) {
	jobs := map[string]*api.Job{"j1": {ID: "j1", Number: 7}, "j2": {ID: "j2"}}
	lookup := func(id string) *api.Job { return jobs[id] }
	for _, tc := range []struct {
		name    string
		setup   func(b *Book)
		free    []bool // each GPU
		foreign []bool
		holder  string // GPU 2's slice 0, or GPU 3's one share
	}{
		{"nothing held", func(*Book) {}, []bool{true, true, false, true}, []bool{false, false, false, false}, ""},
		{"owned by a job", func(b *Book) { b.Allocate("j1", "ana", whole(0)) },
			[]bool{false, true, false, true}, []bool{false, false, false, false}, ""},
		{"owned by a hold", func(b *Book) { b.Allocate("hold-1", "ana", whole(1)) },
			[]bool{true, false, false, true}, []bool{false, false, false, false}, ""},
		{"a foreign process", func(b *Book) {
			b.Nodes().Report("n1", time.Unix(100, 0), nil, []api.ForeignProcess{{GPU: 1, PID: 42}})
		}, []bool{true, false, false, true}, []bool{false, true, false, false}, ""},
		{"owned and foreign: Corral's own", func(b *Book) {
			b.Allocate("j1", "ana", whole(1))
			b.Nodes().Report("n1", time.Unix(100, 0), nil, []api.ForeignProcess{{GPU: 1, PID: 42}})
		}, []bool{true, false, false, true}, []bool{false, false, false, false}, ""},
		{"a slice held by a numbered job", func(b *Book) { b.Allocate("j1", "ana", slice(0)) },
			[]bool{true, true, false, true}, []bool{false, false, false, false}, "7"},
		{"a share held by a job without a number", func(b *Book) { b.Allocate("j2", "ana", share(1024, 10)) },
			[]bool{true, true, false, false}, []bool{false, false, false, false}, "j2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := book()
			tc.setup(b)
			n := b.Snapshot(lookup)[0]
			var fr, fo []bool
			for _, g := range n.GPUs {
				fr, fo = append(fr, g.Free), append(fo, g.Foreign)
			}
			if !slices.Equal(fr, tc.free) || !slices.Equal(fo, tc.foreign) {
				t.Errorf("free %v foreign %v, want %v %v", fr, fo, tc.free, tc.foreign)
			}
			holder := n.GPUs[2].MIG[0].Holder
			if sh := n.GPUs[3].Share; sh != nil && len(sh.Holders) == 1 {
				holder = sh.Holders[0]
			}
			if holder != tc.holder {
				t.Errorf("holder %q, want %q", holder, tc.holder)
			}
		})
	}
}

func TestWholeGPUTakenKeepsItsPartsFromOthers(t *testing.T) {
	b := book()
	b.Own("hold-1", "ana", []api.Allocation{{NodeID: "n1", GPUID: 2}}) // a hold of the MIG GPU whole
	for i, s := range b.Snapshot(noJobs)[0].GPUs[2].MIG {
		if s.Free {
			t.Errorf("slice %d free on a GPU held whole", i)
		}
	}
}

func TestOwnRebuildsAtRecovery(t *testing.T) {
	// What the previous server stored: a job with a whole GPU, a slice
	// and a share's jobs, a hold; the books are rebuilt from them alone.
	stored := []struct {
		id, user string
		as       []api.Allocation
	}{
		{"j1", "ana", []api.Allocation{{NodeID: "n1", GPUID: 0}}},
		{"j2", "ben", []api.Allocation{{NodeID: "n1", GPUID: 2, MIG: &api.AllocatedSlice{Index: 0, Profile: "3g.40gb"}}}},
		{"j3", "ana", []api.Allocation{{NodeID: "n1", GPUID: 3, ShareMiB: 2048, ShareCompute: 25}}},
		{"hold-1", "ana", []api.Allocation{{NodeID: "n1", GPUID: 1}}},
	}
	b := book()
	for _, s := range stored {
		b.Own(s.id, s.user, s.as)
		b.Own(s.id, s.user, s.as) // adopted twice: a share is not counted twice
	}
	for _, tc := range []struct {
		gpu  int
		want string
	}{{0, "j1"}, {1, "hold-1"}, {2, ""}, {3, ""}} {
		if got := b.Owner("n1", tc.gpu); got != tc.want {
			t.Errorf("GPU %d owned by %q, want %q", tc.gpu, got, tc.want)
		}
	}
	n := b.Snapshot(noJobs)[0]
	if s := n.GPUs[2].MIG; s[0].Free || s[0].Holder != "j2" || !s[1].Free {
		t.Errorf("slices after recovery: %+v", s)
	}
	if sh := n.GPUs[3].Share; sh == nil || sh.UsedMiB != 2048 || sh.UsedCompute != 25 || sh.User != "ana" {
		t.Errorf("share after recovery: %+v", sh)
	}
	for _, s := range stored {
		b.Release(s.id, s.as)
	}
	gpus, sl, sh := free(t, b, noJobs)
	if !slices.Equal(gpus, []bool{true, true, false, true}) || !slices.Equal(sl, []bool{true, true}) || sh != nil {
		t.Errorf("all released: free GPUs %v slices %v shares %v", gpus, sl, sh)
	}
}

func TestGPUView(t *testing.T) {
	jobs := map[string]*api.Job{"j1": {ID: "j1", Number: 7}, "j2": {ID: "j2", Number: 8}}
	lookup := func(id string) *api.Job { return jobs[id] }
	held := func(id string) bool { return id == "hold-1" }
	b := book()
	b.Allocate("j1", "ana", whole(0))
	b.Allocate("hold-1", "ana", whole(1))
	b.Allocate("j2", "ben", slice(1))
	b.Allocate("j1", "ana", share(1024, 10))
	devs := b.Nodes().Get("n1").Devices
	for _, tc := range []struct {
		gpu         int
		owner, num  string
		held, parts bool
	}{{0, "j1", "7", false, false}, {1, "hold-1", "", true, false}, {2, "", "", false, true}, {3, "", "", false, true}} {
		g := b.GPU("n1", &devs[tc.gpu], lookup, held)
		if g.Owner.ID != tc.owner || g.Owner.Number != tc.num || g.Held != tc.held || g.PartsBusy != tc.parts {
			t.Errorf("GPU %d: %+v", tc.gpu, g)
		}
	}
	g := b.GPU("n1", &devs[2], lookup, held)
	if len(g.Slices) != 2 || g.Slices[0].ID != "" || g.Slices[1].ID != "j2" || g.Slices[1].Number != "8" {
		t.Errorf("slices: %+v", g.Slices)
	}
	g.MIG.Devices[0].Profile = "changed" // a copy: the node's record stays
	if devs[2].MIG.Devices[0].Profile != "3g.40gb" {
		t.Error("the view changed the node's MIG record")
	}
	g = b.GPU("n1", &devs[3], lookup, held)
	if len(g.Shares) != 1 || g.Shares[0].JobID != "j1" || g.Shares[0].Number != "7" || g.Shares[0].MemoryMiB != 1024 {
		t.Errorf("shares: %+v", g.Shares)
	}
}

func TestPlaceTakesOnlyFreeGPUs(t *testing.T) {
	b := book()
	b.Allocate("j1", "ana", whole(0))
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		gpus int
		want []int // placed GPUs; nil: waits
	}{
		{"one GPU: the free whole one", 1, []int{1}},
		{"two: with the shared GPU no share runs on", 2, []int{1, 3}},
		{"three: not free now (GPU 0 owned, GPU 2 in MIG mode)", 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.Place(now, sched.Job{ID: "hold-1", User: "ana", GPUs: tc.gpus, SubmittedAt: now}, nil, noJobs)
			var got []int
			if len(res.Starts) == 1 {
				got = res.Starts[0].Placements[0].GPUs
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("placed on %v, want %v (%+v)", got, tc.want, res)
			}
			if b.Owner("n1", 1) != "" {
				t.Error("Place changed the books")
			}
		})
	}
}

func TestCountOn(t *testing.T) {
	running := []*api.Job{
		{ID: "a", Allocation: []api.Allocation{{NodeID: "n1"}, {NodeID: "n2"}}},
		{ID: "b", NodeID: "n2"}, // no GPUs, on n2
		{ID: "c", Allocation: []api.Allocation{{NodeID: "n1"}}},
	}
	for node, want := range map[string]int{"n1": 2, "n2": 2, "n3": 0} {
		if got := CountOn(node, slices.Values(running)); got != want {
			t.Errorf("%s: %d jobs, want %d", node, got, want)
		}
	}
	var on []string
	for j := range On("n2", slices.Values(running)) {
		on = append(on, j.ID)
	}
	if !slices.Equal(on, []string{"a", "b"}) {
		t.Errorf("on n2: %v, want [a b] in running's order", on)
	}
}

func TestState(t *testing.T) {
	active := []*api.Job{{ID: "a", Allocation: []api.Allocation{{NodeID: "n1"}}}}
	for _, tc := range []struct {
		node   string
		action string // an admin's, before
		want   string
	}{
		{"n1", "", nodebook.Up},
		{"n1", "cordon", nodebook.Cordoned},
		{"n1", "drain", nodebook.Draining}, // its job is still on it
		{"n2", "drain", nodebook.Drained},  // no job on it
	} {
		t.Run(tc.node+" "+tc.action, func(t *testing.T) {
			n := &nodebook.Node{ID: tc.node}
			if tc.action != "" {
				if err := n.Act(tc.action); err != nil {
					t.Fatal(err)
				}
			}
			if got := State(n, slices.Values(active)); got != tc.want {
				t.Errorf("state %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProfiles(t *testing.T) {
	if got := book().Profiles(); !slices.Equal(got, []string{"3g.40gb"}) {
		t.Errorf("profiles %v", got)
	}
	if got := New().Profiles(); got != nil {
		t.Errorf("no nodes: profiles %v", got)
	}
}
