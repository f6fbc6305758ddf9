package main

import (
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestNodesParts: corral nodes names who holds each MIG slice, and lists
// a shared GPU's MPS shares under it with their holders.
func TestNodesParts(t *testing.T) {
	f := newFakeServer(t)
	on := &api.MIG{Mode: api.MIGEnabled, Devices: []api.MIGDevice{
		{Index: 0, UUID: "MIG-aaaa", Profile: "3g.40gb", MemoryTotal: 40192, AllocatedTo: "j01", AllocatedNumber: "12"},
		{Index: 1, UUID: "MIG-bbbb", Profile: "4g.40gb", MemoryTotal: 40192},
	}}
	s := api.ClusterStatus{TotalGPUs: 2, AllocatedGPUs: 2, Nodes: []api.Node{{NodeID: "n1", Hostname: "h1", State: "up", GPUs: []api.GPU{
		{ID: 0, Model: "H100", MemoryTotal: 81559, MIG: on},
		{ID: 1, Model: "H100", MemoryTotal: 81559, Shared: true, Shares: []api.GPUShareHolder{
			{JobID: "j02", Number: "13", User: "ann", MemoryMiB: 20480, Compute: 25}}},
	}}}}
	f.on("GET", "/cluster/gpu-status", 200, s)
	res := f.run("nodes")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []struct{ row, text string }{
		{"0/0", "12 j01"},
		{"1 ", "(MPS shared)"},
		{"1/share", "MPS share of ann, 25% compute"},
		{"1/share", "13 j02"},
	} {
		found := false
		for _, line := range strings.Split(res.stdout, "\n") {
			found = found || strings.Contains(line, " "+want.row) && strings.Contains(line, want.text)
		}
		if !found {
			t.Errorf("no row %s with %q:\n%s", want.row, want.text, res.stdout)
		}
	}
	for _, line := range strings.Split(res.stdout, "\n") {
		if strings.Contains(line, " 0/1 ") && strings.Contains(line, "j0") {
			t.Errorf("the free slice shows a holder: %q", line)
		}
	}
}

// TestShowPart: corral show says what part of a GPU a job asked for, its
// GPU-equivalents, and the slice or share its allocation holds.
func TestShowPart(t *testing.T) {
	slice := sampleJob()
	slice.GPUPart = api.GPUPart{MIGProfile: "3g.40gb"}
	slice.GPUEquivalents = 3.0 / 7
	slice.Allocation = []api.Allocation{{NodeID: "n1", GPUID: 1, GPUUUID: "GPU-1", MemoryGB: 40, Fraction: 3.0 / 7,
		MIG: &api.AllocatedSlice{Index: 0, UUID: "MIG-aaaa", Profile: "3g.40gb"}}}
	share := sampleJob()
	share.GPUPart = api.GPUPart{GPUShareMiB: 20 << 10, GPUCompute: 25}
	share.GPUEquivalents = 0.25
	share.Allocation = []api.Allocation{{NodeID: "n1", GPUID: 2, GPUUUID: "GPU-2", MemoryGB: 20, Fraction: 0.25, ShareMiB: 20 << 10, ShareCompute: 25}}
	for name, c := range map[string]struct {
		job  api.Job
		want []string
	}{
		"slice": {slice, []string{"MIG slice 3g.40gb", "GPU-equivalents:", "0.4286", "GPU-1, MIG 3g.40gb MIG-aaaa"}},
		"share": {share, []string{"MPS share of 20G, 25% of the compute", "0.25", "GPU-2, MPS share"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer(t)
			f.on("GET", "/jobs/"+c.job.ID, 200, c.job)
			res := f.run("show", c.job.ID)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("show lacks %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}
