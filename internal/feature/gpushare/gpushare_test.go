package gpushare

import (
	"math"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

func layout() *api.MIG {
	return &api.MIG{Mode: api.MIGEnabled, ComputeSlices: 7, Devices: []api.MIGDevice{
		{Index: 0, UUID: "MIG-a", Profile: "3g.40gb", MemoryTotal: 40 << 10, ComputeSlices: 3},
		{Index: 1, UUID: "MIG-b", Profile: "4g.40gb", MemoryTotal: 40 << 10, ComputeSlices: 4},
	}}
}

// TestBooks: what is taken shows in the core's view, by its holder, until
// released; an allocation made from a placement comes back as the same
// part; whole GPUs never enter these books.
func TestBooks(t *testing.T) {
	b := New()
	m := layout()
	k := Key{Node: "n1", GPU: 0}
	base := api.Allocation{NodeID: "n1", GPUID: 0, GPUUUID: "GPU-0", MemoryGB: 80}
	slice := Allocate(base, &sched.Part{MIG: 1, Profile: "4g.40gb", Fraction: 4.0 / 7}, m)
	if slice.MIG == nil || slice.MIG.UUID != "MIG-b" || slice.MemoryGB != 40 || slice.Fraction != 4.0/7 {
		t.Fatalf("slice allocation %+v", slice)
	}
	if !b.Take("j1", "ann", &slice) {
		t.Fatal("a slice was not taken")
	}
	if whole := base; b.Take("j0", "ann", &whole) {
		t.Fatal("a whole GPU entered the parts' books")
	}
	label := func(id string) string { return "#" + id }
	var g sched.GPU
	b.Snap(&g, k, m, false, false, label)
	if g.Free || len(g.MIG) != 2 || !g.MIG[0].Free || g.MIG[1].Free || g.MIG[1].Holder != "#j1" || g.MIGSlices != 7 {
		t.Fatalf("snapshot %+v", g)
	}
	g = sched.GPU{Free: false}
	b.Snap(&g, k, m, false, true, label) // a whole job holds the GPU: no slice is free
	if g.MIG[0].Free {
		t.Fatalf("a slice of a GPU held whole is free: %+v", g.MIG)
	}
	if !b.Busy(k, m) {
		t.Fatal("the GPU with a slice held is not busy")
	}
	b.Release("j1", []api.Allocation{slice})
	if b.Busy(k, m) || b.SliceHolder(k, 1) != "" {
		t.Fatal("a released slice is still held")
	}

	// Shares: two of one user, counted; released one by one.
	sk := Key{Node: "n1", GPU: 2}
	sb := api.Allocation{NodeID: "n1", GPUID: 2, MemoryGB: 80}
	s1 := Allocate(sb, &sched.Part{MIG: -1, ShareMiB: 20 << 10, ShareCompute: 25, Fraction: 0.25}, nil)
	s2 := Allocate(sb, &sched.Part{MIG: -1, ShareMiB: 10 << 10, Fraction: 0.125}, nil)
	b.Take("j2", "ann", &s1)
	b.Take("j3", "ann", &s2)
	b.Take("j3", "ann", &s2) // at recovery and again: once
	g = sched.GPU{Free: true}
	b.Snap(&g, sk, nil, true, false, label)
	if g.Free || g.Share == nil || g.Share.UsedMiB != 30<<10 || g.Share.UsedCompute != 25 || g.Share.User != "ann" || len(g.Share.Holders) != 2 {
		t.Fatalf("shared snapshot %+v %+v", g, g.Share)
	}
	b.Release("j2", []api.Allocation{s1})
	b.Release("j3", []api.Allocation{s2})
	g = sched.GPU{Free: true}
	b.Snap(&g, sk, nil, true, false, label)
	if !g.Free || g.Share.UsedMiB != 0 || g.Share.User != "" {
		t.Fatalf("a shared GPU with no shares left: %+v %+v", g, g.Share)
	}
	if e := Equivalents([]api.Allocation{slice, s1, base}); math.Abs(e-(4.0/7+0.25+1)) > 1e-9 {
		t.Fatalf("equivalents %g", e)
	}
	// The core reads the allocations back as the same parts.
	ps := sched.PlacementsOf([]api.Allocation{slice, s1})
	if len(ps) != 2 || ps[0].Part == nil || ps[0].Part.MIG != 1 || ps[1].Part == nil || ps[1].Part.ShareMiB != 20<<10 {
		t.Fatalf("placements %+v", ps)
	}
}

func TestProfiles(t *testing.T) {
	got := Profiles([]*api.MIG{layout(), nil, {Mode: api.MIGDisabled}, layout()})
	if len(got) != 2 || got[0] != "3g.40gb" || got[1] != "4g.40gb" {
		t.Fatalf("profiles %v", got)
	}
}
