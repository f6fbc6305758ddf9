package orchestrator

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
)

// partsNode is a 4-GPU H100 node: GPU 0 in MIG mode with seven 1g.10gb
// slices, GPU 1 shared (MPS), GPUs 2-3 whole.
func partsNode(t *testing.T) Node {
	t.Helper()
	n := simNode("n1", 4)
	ms, err := gpu.SimMIGLayout("0:1g.10gb*7", 4, 80*1024)
	if err != nil {
		t.Fatal(err)
	}
	n.Devices[0].MIG = ms[0]
	n.Devices[1].Shared = true
	return n
}

// TestHoldParts: a hold may ask for a MIG slice or an MPS share as a job
// does (the same 422s naming the field); the core places it beside jobs,
// never on a unit given twice; it shows in the GPU's holders, is charged
// its fraction, survives a restart and frees its part on release.
func TestHoldParts(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	cfg := Config{Nodes: []Node{partsNode(t)}, Tick: time.Hour, Now: clk.now}
	h := startConfig(t, "", cfg)

	for name, tc := range map[string]struct {
		req   api.AllocateRequest
		field string
	}{
		"not a profile":         {api.AllocateRequest{GPUCount: 1, GPUPart: api.GPUPart{MIGProfile: "big"}}, "mig_profile"},
		"a slice of 2 GPUs":     {api.AllocateRequest{GPUCount: 2, GPUPart: api.GPUPart{MIGProfile: "1g.10gb"}}, "gpu_count"},
		"slice and share":       {api.AllocateRequest{GPUCount: 1, GPUPart: api.GPUPart{MIGProfile: "1g.10gb", GPUShareMiB: 1024}}, "gpu_share_mib"},
		"compute without share": {api.AllocateRequest{GPUCount: 1, GPUPart: api.GPUPart{GPUCompute: 20}}, "gpu_compute"},
		"compute over 100":      {api.AllocateRequest{GPUCount: 1, GPUPart: api.GPUPart{GPUShareMiB: 1024, GPUCompute: 101}}, "gpu_compute"},
		"negative share":        {api.AllocateRequest{GPUCount: 1, GPUPart: api.GPUPart{GPUShareMiB: -1}}, "gpu_share_mib"},
	} {
		tc.req.JobID = "bad"
		_, err := h.o.FeatureOps().Holds.Hold(ctx, tc.req, "ana")
		if !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != tc.field {
			t.Errorf("%s: %v, want a 422 naming %s", name, err, tc.field)
		}
	}
	if _, ok := h.o.holds.Get("bad"); ok {
		t.Fatal("a refused hold was kept")
	}

	slice, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "nb", GPUCount: 1, GPUPart: api.GPUPart{MIGProfile: "1G.10GB"}}, "ana")
	if err != nil {
		t.Fatal(err)
	}
	if len(slice.Allocation) != 1 || slice.Allocation[0].GPUID != 0 || slice.Allocation[0].MIG == nil ||
		slice.Allocation[0].MIG.Profile != "1g.10gb" || math.Abs(slice.Allocation[0].Fraction-1.0/7) > 1e-9 {
		t.Fatalf("slice hold: %+v", slice.Allocation)
	}
	share, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "mps", GPUCount: 1, GPUPart: api.GPUPart{GPUShareMiB: 20 << 10, GPUCompute: 25}}, "ana")
	if err != nil {
		t.Fatal(err)
	}
	if a := share.Allocation; len(a) != 1 || a[0].GPUID != 1 || a[0].ShareMiB != 20<<10 || a[0].ShareCompute != 25 || a[0].Fraction != 0.25 {
		t.Fatalf("share hold: %+v", a)
	}
	// Another user's share never joins ana's MPS server: no other shared GPU.
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "bobs", GPUCount: 1, GPUPart: api.GPUPart{GPUShareMiB: 1 << 10}}, "bob"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("bob's share beside ana's: %v, want 409", err)
	}
	// A whole-GPU hold takes neither the MIG GPU nor the shared one.
	whole, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "w", GPUCount: 2}, "bob")
	if err != nil || len(whole.Allocation) != 2 || whole.Allocation[0].GPUID != 2 || whole.Allocation[1].GPUID != 3 {
		t.Fatalf("whole hold: %+v %v", whole.Allocation, err)
	}
	// A slice job gets another slice than the hold's.
	j := h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1), GPUPart: api.GPUPart{MIGProfile: "1g.10gb"}})
	got := h.running(j.ID)
	if got.Allocation[0].GPUID != 0 || got.Allocation[0].MIG.Index == slice.Allocation[0].MIG.Index {
		t.Fatalf("slice job: %+v beside the hold's %+v", got.Allocation, slice.Allocation)
	}
	holders := func() (sliceHolder, shareHolder string) {
		for _, g := range h.o.Cluster(ctx).Nodes[0].GPUs {
			if g.ID == 0 {
				for _, d := range g.MIG.Devices {
					if d.Index == slice.Allocation[0].MIG.Index {
						sliceHolder = d.AllocatedTo
					}
				}
			}
			if g.ID == 1 && len(g.Shares) == 1 {
				shareHolder = g.Shares[0].JobID
			}
		}
		return sliceHolder, shareHolder
	}
	if s, m := holders(); s != "nb" || m != "mps" {
		t.Fatalf("holders: slice %q, share %q", s, m)
	}

	// After a restart the holds keep their parts.
	h.stop()
	h.stop = nil
	h = startConfig(t, h.path, cfg)
	if s, m := holders(); s != "nb" || m != "mps" {
		t.Fatalf("holders after a restart: slice %q, share %q", s, m)
	}
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "bobs", GPUCount: 1, GPUPart: api.GPUPart{GPUShareMiB: 1 << 10}}, "bob"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("bob's share after a restart: %v, want 409", err)
	}

	// Released, the part is free and its time charged as its fraction.
	clk.add(700 * time.Second)
	if _, err := h.o.FeatureOps().Holds.Release(ctx, "nb"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.o.FeatureOps().Holds.Release(ctx, "mps"); err != nil {
		t.Fatal(err)
	}
	if s, m := holders(); s != "" || m != "" {
		t.Fatalf("holders after release: slice %q, share %q", s, m)
	}
	h.o.mu.RLock()
	used := h.o.ledger.UserUsage("ana", clk.now())
	h.o.mu.RUnlock()
	if want := 700.0/7 + 700.0/4; math.Abs(used-want) > 2 {
		t.Fatalf("ana's usage of the holds: %v GPU-seconds, want %v (1/7 and 1/4 of 700 s)", used, want)
	}
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "bobs", GPUCount: 1, GPUPart: api.GPUPart{GPUShareMiB: 1 << 10}}, "bob"); err != nil {
		t.Fatalf("bob's share once ana's is released: %v", err)
	}
}
