package main

import (
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestNodes(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/cluster/gpu-status", 200, sampleCluster())
	res := f.run("nodes")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines:\n%s", len(lines), res.stdout)
	}
	want := columnStarts(lines[0], "NODE", "HOSTNAME", "STATE", "GPU", "MODEL", "MEM", "USED", "UTIL", "TEMP", "ALLOCATED_TO")
	rows := [][]string{
		{"node-a", "gpu01", "up", "0", "NVIDIA H100 80GB HBM3", "79.6G", "1G", "97%", "41C", "01JAAAAAAAAAAAAAAAAAAAAAAA"},
		{"node-a", "gpu01", "up", "1", "NVIDIA H100 80GB HBM3", "79.6G", "0M", "0%", "-", "hold:notebook"},
		{"node-sim", "laptop", "up", "0", "A100 (sim)", "40G", "0M", "0%", "-", "-"},
	}
	for i, row := range rows {
		got := columnStarts(lines[i+1], row...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("row %q: columns at %v, header at %v\n%s", lines[i+1], got, want, res.stdout)
		}
	}
	if !strings.Contains(lines[4], "3 GPUs on 2 nodes: 1 available, 2 allocated (1 held outside Corral)") ||
		!strings.Contains(lines[4], "simulated") {
		t.Errorf("totals line = %q", lines[4])
	}
}

// TestNodesMIG checks that a GPU with MIG on shows its MIG devices under
// it, one row each with its profile, UUID and memory, and that a mode
// waiting for a reset is told beside the model.
func TestNodesMIG(t *testing.T) {
	f := newFakeServer(t)
	on := &api.MIG{Mode: api.MIGEnabled, Devices: []api.MIGDevice{
		{Index: 0, UUID: "MIG-aaaa", Profile: "3g.40gb", MemoryTotal: 40192, GPUInstance: 1, ComputeInstance: 0},
		{Index: 1, UUID: "MIG-bbbb", Profile: "1g.10gb", MemoryTotal: 9856, GPUInstance: 9, ComputeInstance: 0},
	}}
	s := api.ClusterStatus{TotalGPUs: 3, AvailableGPUs: 3, Nodes: []api.Node{{NodeID: "n1", Hostname: "h1", State: "up", GPUs: []api.GPU{
		{ID: 0, Model: "NVIDIA H100 80GB HBM3", MemoryTotal: 81559, MIG: on},
		{ID: 1, Model: "NVIDIA H100 80GB HBM3", MemoryTotal: 81559, MIG: &api.MIG{Mode: api.MIGDisabled, PendingMode: api.MIGEnabled}},
		{ID: 2, Model: "NVIDIA H100 80GB HBM3", MemoryTotal: 81559, MIG: &api.MIG{Mode: api.MIGDisabled}},
	}}}}
	f.on("GET", "/cluster/gpu-status", 200, s)
	res := f.run("nodes")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("got %d lines, want a header, 3 GPUs, 2 MIG devices and the totals:\n%s", len(lines), res.stdout)
	}
	cells := func(line string) []string { return regexp.MustCompile(`\s{2,}`).Split(line, -1) }
	for i, row := range [][]string{
		{"0", "NVIDIA H100 80GB HBM3 (MIG: 2 devices)", "79.6G"},
		{"0/0", "MIG 3g.40gb MIG-aaaa", "39.2G"},
		{"0/1", "MIG 1g.10gb MIG-bbbb", "9.6G"},
		{"1", "NVIDIA H100 80GB HBM3 (MIG on at next reset)", "79.6G"},
		{"2", "NVIDIA H100 80GB HBM3", "79.6G"},
	} {
		// NODE HOSTNAME STATE CONTAINMENT GPU MODEL MEM ...
		if got := cells(lines[i+1]); len(got) < 7 || !reflect.DeepEqual(got[4:7], row) {
			t.Errorf("row %d: GPU, MODEL, MEM = %q, want %q\n%s", i+1, got, row, res.stdout)
		}
	}
}

func TestPolicy(t *testing.T) {
	f := newFakeServer(t)
	pol := api.Policies{Policy: "fair_share", Backfill: true, Gang: true, Available: []string{"fair_share", "priority", "fcfs", "sjf"},
		StarveAfter: 172800, StarveShare: 1, StarveBacklog: 1, StarveLightShare: 0.3, StarveLightDrain: 604800, StarveLightFloor: 43200, ReserveAfter: 7200, TailFactor: 1, TailWait: 0.02}
	f.on("GET", "/orchestrator/policies", 200, pol)
	f.on("PUT", "/orchestrator/policies", 200, pol)

	for _, args := range [][]string{{"policy"}, {"policy", "get"}} {
		res := f.run(args...)
		if res.code != 0 || !strings.Contains(res.stdout, "fair_share") || !strings.Contains(res.stdout, "backfill:") ||
			!strings.Contains(res.stdout, "after 2d0h and 1 x the backlog, holding at most 1 of the GPUs, oldest first off") ||
			!strings.Contains(res.stdout, "after 2d0h alone, holding at most 0.3 of the GPUs, while the queue drains within 7d0h; sooner as the queue shortens, down to 12h0m") ||
			!strings.Contains(res.stdout, "estimate 1 x the backlog, after waiting 0.02 of it") {
			t.Errorf("%v: exit %d, %q %q", args, res.code, res.stdout, res.stderr)
		}
	}
	tests := []struct {
		args []string
		body string
	}{
		{[]string{"policy", "set", "FCFS"}, `{"policy":"fcfs"}`},
		{[]string{"policy", "set", "--policy", "sjf", "--backfill=false"}, `{"policy":"sjf","backfill":false}`},
		{[]string{"policy", "set", "--preemption"}, `{"preemption":true}`},
		{[]string{"policy", "set", "priority", "--spread", "--aging", "1h", "--min-run-time", "15m", "--idle-action", "preempt"},
			`{"policy":"priority","spread":true,"aging_interval":"1h","min_run_time":"15m","idle_action":"preempt"}`},
		{[]string{"policy", "set", "--starve-after", "96h", "--starve-share", "0.2", "--oldest-first", "--reserve-after", "0", "--tail-factor", "2", "--tail-wait", "0.02"},
			`{"starve_after":"96h","starve_share":0.2,"oldest_first":true,"reserve_after":"0","tail_factor":2,"tail_wait":0.02}`},
		{[]string{"policy", "set", "--tail-factor", "0"}, `{"tail_factor":0}`},
		{[]string{"policy", "set", "--starve-backlog", "0"}, `{"starve_backlog":0}`},
		{[]string{"policy", "set", "--starve-light-share", "0.2", "--starve-light-drain", "96h"}, `{"starve_light_share":0.2,"starve_light_drain":"96h"}`},
		{[]string{"policy", "set", "--starve-light-floor", "6h"}, `{"starve_light_floor":"6h"}`},
		{[]string{"quota", "set", "project", "vision", "16"}, `{"quotas":{"projects":{"vision":16}}}`},
		{[]string{"quota", "rm", "user", "ana"}, `{"quotas":{"users":{"ana":null}}}`},
		{[]string{"weight", "set", "user", "ana", "2.5"}, `{"weights":{"users":{"ana":2.5}}}`},
	}
	for _, tt := range tests {
		res := f.run(tt.args...)
		if res.code != 0 {
			t.Errorf("%v: exit %d, %s", tt.args, res.code, res.stderr)
			continue
		}
		if got := string(f.last().Body); got != tt.body {
			t.Errorf("%v: body %s, want %s", tt.args, got, tt.body)
		}
	}
}

func TestPolicyUsageErrors(t *testing.T) {
	f := newFakeServer(t)
	for _, args := range [][]string{
		{"policy", "set"},
		{"policy", "set", "--aging", "soon"},
		{"policy", "set", "--starve-after", "soon"},
		{"policy", "set", "--tail-factor", "many"},
		{"policy", "set", "--tail-wait", "NaN"},
		{"quota", "set", "team", "x", "1"},
		{"quota", "set", "user", "ana", "-1"},
		{"weight", "set", "user", "ana", "0"},
		{"quota", "set", "user", "ana"},
	} {
		if res := f.run(args...); res.code != 2 || res.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, res.code, res.stderr)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("usage errors sent %d requests", n)
	}
}

func TestOrchestrator(t *testing.T) {
	f := newFakeServer(t)
	last := time.Now().Add(-2 * time.Second)
	st := api.OrchestratorStatus{Running: true, Policy: "fair_share", Cycles: 42, LastCycleAt: &last, LastCycleMS: 1.5, StartedAt: t0, Version: "dev"}
	f.on("GET", "/orchestrator/status", 200, st)
	f.on("POST", "/orchestrator/start", 200, st)
	st.Running = false
	f.on("POST", "/orchestrator/stop", 200, st)
	tests := []struct {
		args         []string
		method, path string
		out          string
	}{
		{[]string{"orchestrator"}, "GET", "/orchestrator/status", "running"},
		{[]string{"orchestrator", "status"}, "GET", "/orchestrator/status", "42 (last"},
		{[]string{"orchestrator", "start"}, "POST", "/orchestrator/start", "running"},
		{[]string{"orchestrator", "stop"}, "POST", "/orchestrator/stop", "stopped"},
	}
	for _, tt := range tests {
		res := f.run(tt.args...)
		got := f.last()
		if res.code != 0 || got.Method != tt.method || got.Path != tt.path || !strings.Contains(res.stdout, tt.out) {
			t.Errorf("%v: exit %d, sent %s %s, out %q, err %q", tt.args, res.code, got.Method, got.Path, res.stdout, res.stderr)
		}
	}
}

func TestJSONOutput(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/queue", 200, sampleQueue())
	f.on("GET", "/jobs", 200, api.JobList{Jobs: []api.Job{sampleJob()}})
	f.on("GET", "/jobs/01J", 200, sampleJob())
	f.on("POST", "/queue/submit", 201, sampleJob())
	f.on("GET", "/cluster/gpu-status", 200, sampleCluster())
	f.on("GET", "/orchestrator/policies", 200, api.Policies{Policy: "fcfs"})
	f.on("GET", "/orchestrator/status", 200, api.OrchestratorStatus{Running: true, Policy: "fcfs"})
	tests := []struct {
		args []string
		into any
		want any
	}{
		{[]string{"queue"}, &api.QueueResponse{}, sampleQueue()},
		{[]string{"jobs"}, &api.JobList{}, api.JobList{Jobs: []api.Job{sampleJob()}}},
		{[]string{"show", "01J"}, &api.Job{}, sampleJob()},
		{[]string{"submit", "--", "true"}, &api.Job{}, sampleJob()},
		{[]string{"nodes"}, &api.ClusterStatus{}, sampleCluster()},
		{[]string{"policy", "get"}, &api.Policies{}, api.Policies{Policy: "fcfs"}},
		{[]string{"orchestrator", "status"}, &api.OrchestratorStatus{}, api.OrchestratorStatus{Running: true, Policy: "fcfs"}},
	}
	for _, tt := range tests {
		for _, flag := range [][]string{{"-o", "json"}, {"--output=json"}} {
			res := f.run(append(flag, tt.args...)...)
			if res.code != 0 {
				t.Errorf("%v: exit %d, %s", tt.args, res.code, res.stderr)
				continue
			}
			if err := json.Unmarshal([]byte(res.stdout), tt.into); err != nil {
				t.Errorf("%v: output is not JSON: %v\n%s", tt.args, err, res.stdout)
				continue
			}
			// Compare through JSON so that times compare by value.
			got, _ := json.Marshal(tt.into)
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Errorf("%v: JSON output\n%s\nwant\n%s", tt.args, got, want)
			}
			if !strings.Contains(res.stdout, "\n  ") {
				t.Errorf("%v: JSON output is not indented", tt.args)
			}
		}
	}
}

func TestServerAndTokenFromEnv(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/orchestrator/policies", 200, api.Policies{Policy: "fcfs"})
	hostport := strings.TrimPrefix(f.srv.URL, "http://")

	t.Setenv("CORRAL_SERVER", hostport) // no scheme
	t.Setenv("CORRAL_TOKEN", "env-token")
	res := runArgs("policy", "get")
	if res.code != 0 {
		t.Fatalf("CORRAL_SERVER=%s: exit %d, %s", hostport, res.code, res.stderr)
	}
	if a := f.last().Header.Get("Authorization"); a != "Bearer env-token" {
		t.Errorf("Authorization = %q", a)
	}

	res = runArgs("--token", "flag-token", "policy", "get")
	if a := f.last().Header.Get("Authorization"); res.code != 0 || a != "Bearer flag-token" {
		t.Errorf("--token: exit %d, Authorization %q", res.code, a)
	}

	// --server beats CORRAL_SERVER.
	other := newFakeServer(t) // resets the env
	other.on("GET", "/orchestrator/policies", 200, api.Policies{Policy: "sjf"})
	t.Setenv("CORRAL_SERVER", hostport)
	res = runArgs("--server", other.srv.URL, "policy", "get")
	if res.code != 0 || !strings.Contains(res.stdout, "sjf") {
		t.Errorf("--server: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if a, ok := other.last().Header["Authorization"]; ok {
		t.Errorf("sent Authorization %q with no token", a)
	}
}

func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	t.Setenv("CORRAL_TOKEN", "")
	t.Setenv("CORRAL_SERVER", addr)
	for _, args := range [][]string{{"queue"}, {"submit", "--", "true"}, {"logs", "-f", "01J"}} {
		res := runArgs(args...)
		if res.code != 1 {
			t.Errorf("%v: exit %d, want 1", args, res.code)
		}
		want := "corral: cannot reach the Corral server at " + addr + " (connection refused); start one with \"corral up\", or point CORRAL_SERVER or --server at it\n"
		if res.stderr != want {
			t.Errorf("%v: stderr\n%q\nwant\n%q", args, res.stderr, want)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	f := newFakeServer(t)
	f.on("POST", "/queue/submit", http.StatusUnprocessableEntity,
		api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_field", Message: "must be between 0 and 64", Field: "gpu_count"}})
	f.on("GET", "/queue", http.StatusUnauthorized, api.ErrorBody{Error: api.ErrorDetail{Code: "unauthorized", Message: "missing token"}})
	f.on("GET", "/cluster/gpu-status", http.StatusBadGateway, "upstream down")
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"submit", "--gpus", "99", "--", "true"}, "corral: gpu_count: must be between 0 and 64\n"},
		{[]string{"queue"}, "corral: missing token (the server needs a valid token: set CORRAL_TOKEN or pass --token; an admin makes one with corral token create)\n"},
		{[]string{"nodes"}, "corral: the server failed (HTTP 502): upstream down\n"},
		{[]string{"show", "01JNOPE"}, "corral: no route /jobs/01JNOPE\n"},
	}
	for _, tt := range tests {
		res := f.run(tt.args...)
		if res.code != 1 || res.stderr != tt.stderr {
			t.Errorf("%v: exit %d, stderr %q; want 1, %q", tt.args, res.code, res.stderr, tt.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Setenv("CORRAL_TOKEN", "do-not-print-me")
	res := runArgs("--help")
	if res.code != 0 || !strings.Contains(res.stdout, "submit") || strings.Contains(res.stdout, "do-not-print-me") {
		t.Errorf("--help: exit %d\n%s", res.code, res.stdout)
	}
	res = runArgs("submit", "--help")
	if res.code != 0 || !strings.Contains(res.stdout, "--gpus") {
		t.Errorf("submit --help: exit %d\n%s", res.code, res.stdout)
	}
}

func TestPrintDiskFull(t *testing.T) {
	var b strings.Builder
	s := api.ClusterStatus{Nodes: []api.Node{{NodeID: "a"}, {NodeID: "b", DiskFull: "its log disk (/d) has 1.0% free, under --min-free-disk 5%"}}}
	if err := printDiskFull(&b, s); err != nil || b.String() != "node b takes no new jobs: its log disk (/d) has 1.0% free, under --min-free-disk 5%\n" {
		t.Errorf("printDiskFull: %q %v", b.String(), err)
	}
}
