package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const simTrace = `{"id":"a","submit":0,"duration_s":100,"gpus":4,"user":"x"}
{"id":"b","submit":10,"duration_s":50,"gpus":2,"user":"y"}
{"id":"c","submit":20,"duration_s":30,"gpus":2,"user":"x"}
{"id":"d","submit":20,"duration_s":300,"gpus":8,"user":"y","estimate_s":200}
`

func simCLI(t *testing.T, args ...string) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runWith(args, &out, &errb); code != exitOK {
		t.Fatalf("corral %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.Bytes()
}

// --json prints exactly the documented fields; with --timing=false the
// output is the same, byte for byte, on every run.
func TestSimJSONDeterministic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte(simTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"sim", "--trace", path, "--cluster", "2x4", "--policy", "fair_share", "--backfill", "--json", "--timing=false"}
	a, b := simCLI(t, args...), simCLI(t, args...)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
	var m map[string]any
	if err := json.Unmarshal(a, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"jobs", "completed", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "avg_queue_s", "p95_queue_s",
		"max_queue_s", "makespan_s", "makespan_lower_bound_s", "makespan_arrival_bound_s", "utilization", "backlog_utilization", "jain_fairness",
		"estimates_within_50pct", "estimates_off_2x", "estimates_none",
		"preemptions", "sched_cycles", "sched_cycle_p99_ms", "wall_s"}
	if len(m) != len(want) {
		t.Fatalf("fields %v, want exactly %v", m, want)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Fatalf("no field %q in %s", k, a)
		}
	}
	if m["jobs"] != 4.0 || m["completed"] != 4.0 || m["wall_s"] != 0.0 {
		t.Fatalf("unexpected %s", a)
	}
	// The table and compare run too; bad flags are usage errors.
	if out := simCLI(t, "sim", "compare", "--trace", path, "--cluster", "2x4", "--policies", "fcfs,sjf", "--plot", filepath.Join(t.TempDir(), "p.svg")); !bytes.Contains(out, []byte("sjf")) {
		t.Fatalf("compare printed %s", out)
	}
	var errb bytes.Buffer
	if code := runWith([]string{"sim", "--trace", path, "--cluster", "2y4"}, &bytes.Buffer{}, &errb); code != exitUsage {
		t.Fatalf("bad --cluster: exit %d", code)
	}
}
