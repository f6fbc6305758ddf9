package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// TestSimMIG: corral sim --mig places a trace's mig_profile jobs on the
// layout's slices (fourteen notebooks on two sliced GPUs wait for nothing;
// taking whole GPUs without --mig, they queue), and a bad layout is a
// usage error.
func TestSimMIG(t *testing.T) {
	var trace strings.Builder
	for i := range 14 {
		fmt.Fprintf(&trace, `{"id":"nb%d","submit":%d,"duration_s":3600,"gpus":1,"user":"u","mig_profile":"1g.10gb"}`+"\n", i, i)
	}
	for i := range 6 {
		fmt.Fprintf(&trace, `{"id":"t%d","submit":%d,"duration_s":7200,"gpus":1,"user":"t"}`+"\n", i, i)
	}
	path, queue := simQueue(t, trace.String(), 20)
	if q := queue("--mig", "0-1:1g.10gb*7"); q != 0 {
		t.Errorf("with slices the longest wait is %gs, want 0", q)
	}
	if q := queue(); q == 0 {
		t.Error("without slices nothing waited; want the notebooks to queue for whole GPUs")
	}
	var out, errb bytes.Buffer
	if code := runWith([]string{"sim", "--trace", path, "--cluster", "1x8", "--mig", "0-9:1g.10gb"}, &out, &errb); code == exitOK || !strings.Contains(errb.String(), "--mig") {
		t.Errorf("a layout past the node's GPUs: exit %d, %q", code, errb.String())
	}
}

// TestSimShared: corral sim --shared N runs a trace's gpu_share_mib jobs
// as MPS shares of N GPUs of each node: eight 20 GB notebooks and six
// whole-GPU jobs on one 8-GPU node all run at once, where without shared
// GPUs they queue; N past the node's GPUs is refused.
func TestSimShared(t *testing.T) {
	var trace strings.Builder
	for i := range 8 {
		fmt.Fprintf(&trace, `{"id":"nb%d","submit":%d,"duration_s":3600,"gpus":1,"user":"u","gpu_share_mib":20480}`+"\n", i, i)
	}
	for i := range 6 {
		fmt.Fprintf(&trace, `{"id":"t%d","submit":%d,"duration_s":7200,"gpus":1,"user":"t"}`+"\n", i, 8+i) // after the shares: an idle shared GPU takes a whole job too
	}
	path, queue := simQueue(t, trace.String(), 14)
	if q := queue("--shared", "2"); q != 0 {
		t.Errorf("with 2 shared GPUs the longest wait is %gs, want 0", q)
	}
	if q := queue(); q == 0 {
		t.Error("without shared GPUs nothing waited; want the notebooks to queue for whole GPUs")
	}
	for _, args := range [][]string{{"--shared", "9"}, {"--shared", "7", "--mig", "0-1:1g.10gb*7"}, {"--shared", "-1"}} {
		var out, errb bytes.Buffer
		if code := runWith(append([]string{"sim", "--trace", path, "--cluster", "1x8"}, args...), &out, &errb); code == exitOK || !strings.Contains(errb.String(), "--shared") {
			t.Errorf("%v: exit %d, %q", args, code, errb.String())
		}
	}
}

// TestHoldHeader: a hold's header names a part as a part, not as GPUs.
func TestHoldHeader(t *testing.T) {
	tests := map[string]struct {
		as   []api.Allocation
		want string
	}{
		"whole GPUs":  {[]api.Allocation{{NodeID: "n1"}, {NodeID: "n1", GPUID: 1}}, "hold h1 (job j1): 2 GPUs\n"},
		"a slice":     {[]api.Allocation{{NodeID: "n1", MIG: &api.AllocatedSlice{Index: 3, UUID: "MIG-x", Profile: "1g.10gb"}}}, "hold h1 (job j1): 1 MIG slice (1g.10gb)\n"},
		"a share":     {[]api.Allocation{{NodeID: "n1", ShareMiB: 20 << 10}}, "hold h1 (job j1): a 20 GiB share\n"},
		"compute too": {[]api.Allocation{{NodeID: "n1", ShareMiB: 512, ShareCompute: 25}}, "hold h1 (job j1): a 512 MiB share (25% of the compute)\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printHold(&b, api.Hold{JobID: "j1", Name: "h1", Allocation: tc.as}); err != nil {
				t.Fatal(err)
			}
			if got, _, _ := strings.Cut(b.String(), "  "); got != tc.want {
				t.Errorf("header %q, want %q", got, tc.want)
			}
		})
	}
}

// simQueue writes trace to a file and returns its path and a function
// that replays it on one 8-GPU node with args and returns the longest
// wait, failing the test unless all jobs of the trace completed.
func simQueue(t *testing.T, trace string, jobs int) (string, func(args ...string) float64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nb.jsonl")
	if err := os.WriteFile(path, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, func(args ...string) float64 {
		t.Helper()
		var m map[string]any
		out := simCLI(t, append([]string{"sim", "--trace", path, "--cluster", "1x8", "--json", "--timing=false"}, args...)...)
		if err := json.Unmarshal(out, &m); err != nil || m["completed"] != float64(jobs) {
			t.Fatalf("%v: %s (%v)", args, out, err)
		}
		return m["max_queue_s"].(float64)
	}
}
