package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/daemon"
)

// TestMain lets this test binary stand in for `corral shim`: the agent of
// an in-process `corral up` runs jobs under os.Executable() shim ...
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// startUp runs `corral up --simulate-gpus N` in this process on a free port
// with a fresh data dir, and returns its URL. The CLI run by the test finds
// the admin token in CORRAL_TOKEN.
func startUp(t *testing.T, gpus string) string {
	t.Helper()
	const token = "bench-test-admin-token-0123456789abcdef"
	t.Setenv("CORRAL_ADMIN_TOKEN", token)
	t.Setenv("CORRAL_TOKEN", token)
	t.Setenv("CORRAL_SERVER", "")
	t.Setenv("CORRAL_CONFIG", filepath.Join(t.TempDir(), "client.json"))
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := daemon.NewUpCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--simulate-gpus", gpus, "--heartbeat", "200ms", "--log-level", "error", "--run-as", "agent"})
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(ctx)
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("corral up: %v", err)
		}
	})
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), " is up at "); ok {
			go io.Copy(io.Discard, pr) // the rest of the banner
			return strings.TrimSpace(after)
		}
	}
	t.Fatalf("corral up ended before it was up: %v", <-done)
	return ""
}

// jsonKeys returns the keys of a JSON object, sorted.
func jsonKeys(t *testing.T, s string) (map[string]any, []string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return m, keys
}

func TestBenchAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs corral up")
	}
	url := startUp(t, "2")
	cl := client.New(url, client.WithToken(os.Getenv("CORRAL_TOKEN")))
	ctx := context.Background()

	// bench submit: every submission acknowledged, then canceled, and the
	// orchestrator running again.
	res := runArgs("--server", url, "bench", "submit", "--n", "40", "--concurrency", "4", "-o", "json")
	if res.code != 0 {
		t.Fatalf("bench submit: exit %d\n%s", res.code, res.stderr)
	}
	m, keys := jsonKeys(t, res.stdout)
	want := []string{"canceled", "concurrency", "errors", "errors_by_status", "hold", "latency_max_ms", "latency_mean_ms",
		"latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "n", "server", "submissions_per_s", "submitted", "wall_s"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("bench submit -o json keys:\n got %v\nwant %v", keys, want)
	}
	if m["n"] != 40.0 || m["submitted"] != 40.0 || m["errors"] != 0.0 || m["canceled"] != 40.0 || m["hold"] != true {
		t.Errorf("bench submit: %s", res.stdout)
	}
	st, err := cl.OrchestratorStatus(ctx)
	if err != nil || !st.Running || st.QueuedJobs != 0 {
		t.Errorf("after bench submit: %+v, %v; want running with nothing queued", st, err)
	}

	// The table, for people.
	res = runArgs("--server", url, "bench", "submit", "--n", "3", "--concurrency", "2", "--progress", "0")
	if res.code != 0 || !strings.Contains(res.stdout, "bench submit: 3 jobs from 2 workers") ||
		!strings.Contains(res.stdout, "submitted") || !strings.Contains(res.stdout, "p99") {
		t.Errorf("bench submit table: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// bench start: every job started and completed on the simulated GPUs.
	res = runArgs("--server", url, "bench", "start", "--n", "10", "--concurrency", "3", "-o", "json")
	if res.code != 0 {
		t.Fatalf("bench start: exit %d\n%s", res.code, res.stderr)
	}
	m, keys = jsonKeys(t, res.stdout)
	want = []string{"baseline_spawns_per_s", "completed", "completions_per_s", "concurrency", "errors", "errors_by_status", "failed", "first_start_s",
		"gpus", "last_finish_s", "last_start_s", "n", "server", "simulated", "started", "starts_per_s", "submissions_per_s",
		"submit_wall_s", "submitted", "wall_s"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("bench start -o json keys:\n got %v\nwant %v", keys, want)
	}
	if m["submitted"] != 10.0 || m["started"] != 10.0 || m["completed"] != 10.0 || m["failed"] != 0.0 ||
		m["gpus"] != 2.0 || m["simulated"] != true || m["errors"] != 0.0 || !(m["baseline_spawns_per_s"].(float64) > 0) {
		t.Errorf("bench start: %s", res.stdout)
	}
	st, err = cl.OrchestratorStatus(ctx)
	if err != nil || !st.Running {
		t.Errorf("after bench start: %+v, %v; want running", st, err)
	}

	// A stopped orchestrator is left stopped.
	if _, err := cl.StopOrchestrator(ctx); err != nil {
		t.Fatal(err)
	}
	res = runArgs("--server", url, "bench", "start", "--n", "2", "--concurrency", "2", "--progress", "0")
	if res.code != 0 || !strings.Contains(res.stdout, "starts") {
		t.Fatalf("bench start table: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if st, err = cl.OrchestratorStatus(ctx); err != nil || st.Running {
		t.Errorf("after bench start on a stopped orchestrator: %+v, %v; want stopped", st, err)
	}
}

func TestBenchFlags(t *testing.T) {
	f := newFakeServer(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bench", "submit", "--n", "0"}, "--n must be at least 1"},
		{[]string{"bench", "submit", "--concurrency", "0"}, "--concurrency must be between 1 and 10000"},
		{[]string{"bench", "submit", "--progress", "-1s"}, "--progress must not be negative"},
		{[]string{"bench", "submit", "--n", "ten"}, "invalid argument"},
		{[]string{"bench", "submit", "extra"}, "too many arguments"},
		{[]string{"bench", "start", "--n", "100001"}, "--n must be at most 100000"},
		{[]string{"bench", "start", "--timeout", "-1m"}, "--timeout must not be negative"},
		{[]string{"bench", "submit", "-o", "yaml"}, "--output \"yaml\""},
	}
	for _, tt := range tests {
		res := f.run(tt.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, res.code, res.stderr, tt.want)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("bad flags sent %d requests", n)
	}
}

func TestBenchNeedsAdmin(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/orchestrator/status", 200, map[string]any{"running": true})
	f.on("POST", "/orchestrator/stop", 403, map[string]any{"error": map[string]string{"code": "forbidden", "message": "needs the admin role"}})
	res := f.run("bench", "submit", "--n", "5")
	if res.code != exitError || !strings.Contains(res.stderr, "--hold") || !strings.Contains(res.stderr, "admin") {
		t.Errorf("exit %d, stderr %q", res.code, res.stderr)
	}
	for _, r := range f.requests() {
		if r.Path == "/queue/submit" {
			t.Errorf("submitted although the orchestrator could not be held")
		}
	}
	// A refused token stops the run at once, with the server's reason.
	f.on("POST", "/queue/submit", 401, map[string]any{"error": map[string]string{"code": "unauthenticated", "message": "bad token"}})
	res = f.run("bench", "submit", "--n", "1000", "--hold=false", "--cleanup=false", "--concurrency", "2")
	if res.code != exitError || !strings.Contains(res.stderr, "bad token") {
		t.Errorf("exit %d, stderr %q", res.code, res.stderr)
	}
	if n := len(f.requests()); n > 20 {
		t.Errorf("%d requests after a 401; want the run to stop", n)
	}
}

// TestServerLimitFlags: bad limits on `corral server` are usage errors
// that name the flag, before anything is opened or listened on.
func TestServerLimitFlags(t *testing.T) {
	f := newFakeServer(t)
	dir := t.TempDir()
	for _, tt := range []struct {
		flag string
		want string
	}{
		{"--audit-retention=-1h", "--audit-retention must not be negative"},
		{"--max-run-time=-1m", "--max-run-time must not be negative"},
		{"--submit-rate=-1", "--submit-rate and --submit-burst must not be negative"},
	} {
		res := f.run("server", "--data-dir", dir, "--listen", "127.0.0.1:0", tt.flag)
		if res.code != exitUsage || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tt.flag, res.code, res.stderr, tt.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("bad flags left %d files in the data dir", len(ents))
	}
}

// TestBenchStopsOnFullQueue: a full queue will not empty while the run
// holds the orchestrator, so the run stops at once and names the flag.
func TestBenchStopsOnFullQueue(t *testing.T) {
	f := newFakeServer(t)
	f.on("POST", "/queue/submit", 429, map[string]any{"error": map[string]string{"code": "queue_full", "message": "the queue is full (10 jobs; the limit is 10)"}})
	res := f.run("bench", "submit", "--n", "1000", "--hold=false", "--cleanup=false", "--concurrency", "2")
	if res.code != exitError || !strings.Contains(res.stderr, "the queue is full") || !strings.Contains(res.stderr, "--max-queue-size 0") {
		t.Errorf("exit %d, stderr %q", res.code, res.stderr)
	}
	if n := len(f.requests()); n > 20 {
		t.Errorf("%d requests after a full queue; want the run to stop", n)
	}
}
