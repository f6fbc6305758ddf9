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
