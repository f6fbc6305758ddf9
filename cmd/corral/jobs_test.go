package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestSubmitBody(t *testing.T) {
	t.Setenv("USER", "alice")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		want   map[string]any // fields of the body; nil means "must be absent"
		idemp  string
		stdout string
	}{
		{"single arg is verbatim", []string{"--", "echo $CUDA_VISIBLE_DEVICES && nvidia-smi"},
			map[string]any{"command": "echo $CUDA_VISIBLE_DEVICES && nvidia-smi", "user": nil, "workdir": cwd, "gpu_count": nil, "priority": nil}, "",
			"submitted job 01JNEW (queued, position 3)\n"},
		{"several args are quoted", []string{"--gpus", "2", "--", "sh", "-c", `echo "hi there"`, "it's", "", "a=b", "x*"},
			map[string]any{"command": `sh -c 'echo "hi there"' 'it'"'"'s' '' a=b 'x*'`, "gpu_count": 2.0}, "", ""},
		{"flags after the command are the command's", []string{"--gpus", "0", "python", "train.py", "--lr", "3e-4", "--gpus", "9"},
			map[string]any{"command": "python train.py --lr 3e-4 --gpus 9", "gpu_count": 0.0}, "", ""},
		{"priority and estimate pass through", []string{"--priority", "high", "--estimate", "1h30m", "--name", "n", "--project", "p", "--user", "bob", "--", "true"},
			map[string]any{"priority": "high", "estimated_duration": "1h30m", "estimate_from": "flag", "name": "n", "project": "p", "user": "bob"}, "", ""},
		{"-t is the time limit, Slurm's forms", []string{"-t", "2-00:00:00", "--", "true"},
			map[string]any{"time_limit": "2-00:00:00", "time_limit_from": "flag", "estimated_duration": nil}, "", ""},
		{"a bare -t is minutes", []string{"-t", "90", "--", "true"}, map[string]any{"time_limit": "1h30m0s"}, "", ""},
		{"--time-limit follows -t", []string{"--time-limit", "90", "--", "true"}, map[string]any{"time_limit": "1h30m0s"}, "", ""},
		{"days and weeks", []string{"--time", "1d12h", "--estimate", "1w", "--", "true"}, map[string]any{"time_limit": "1d12h", "estimated_duration": "1w"}, "", ""},
		{"Slurm's short names", []string{"-J", "sweep", "-N", "2", "-G", "4", "-c", "8", "-D", "/tmp", "--", "true"},
			map[string]any{"name": "sweep", "nodes": 2.0, "gpu_count": 4.0, "cpus": 8.0, "workdir": "/tmp"}, "", ""},
		{"-o and -e are files, --signal normalized", []string{"-o", "out-%j.log", "-e", "/tmp/%x.err", "--signal", "B:SIGUSR1@90", "--", "true"},
			map[string]any{"output": "out-%j.log", "error": "/tmp/%x.err", "signal": "B:USR1@90"}, "", ""},
		{"-o json keeps its old meaning", []string{"-o", "json", "--", "true"}, map[string]any{"output": nil}, "", ""},
		{"--begin is read here", []string{"--begin", "2030-01-02T03:04:05Z", "--", "true"}, map[string]any{"begin": "2030-01-02T03:04:05Z"}, "", ""},
		{"numeric priority passes through", []string{"--priority", "3", "--", "true"}, map[string]any{"priority": "3"}, "", ""},
		{"resources", []string{"--gpus", "8", "--nodes", "2", "--gpu-mem", "40", "--gpu-type", "H100", "--max-retries", "2", "--", "true"},
			map[string]any{"gpu_count": 8.0, "nodes": 2.0, "gpu_memory_gb": 40.0, "gpu_type": "H100", "max_retries": 2.0}, "", ""},
		{"env", []string{"--export", "NONE", "--env", "A=1", "--env", "B=x=y,z", "--env", "EMPTY=", "--", "true"},
			map[string]any{"env": map[string]any{"A": "1", "B": "x=y,z", "EMPTY": ""}}, "", ""},
		{"workdir made absolute", []string{"--workdir", "sub/dir", "--", "true"},
			map[string]any{"workdir": filepath.Join(cwd, "sub/dir")}, "", ""},
		{"idempotency key", []string{"--idempotency-key", "k-42", "--", "true"}, map[string]any{}, "k-42", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.on("POST", "/queue/submit", http.StatusCreated, api.Job{ID: "01JNEW", State: api.StateQueued, QueuePosition: 3, Priority: api.PriorityNormal})
			res := f.run(append([]string{"submit"}, tt.args...)...)
			if res.code != 0 {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			req := f.last()
			if req.Method != "POST" || req.Path != "/queue/submit" {
				t.Fatalf("sent %s %s", req.Method, req.Path)
			}
			var body map[string]any
			if err := json.Unmarshal(req.Body, &body); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				got, ok := body[k]
				if want == nil {
					if ok {
						t.Errorf("body has %s = %v, want it absent", k, got)
					}
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("body[%s] = %#v, want %#v", k, got, want)
				}
			}
			if got := req.Header.Get("Idempotency-Key"); got != tt.idemp {
				t.Errorf("Idempotency-Key = %q, want %q", got, tt.idemp)
			}
			if tt.stdout != "" && res.stdout != tt.stdout {
				t.Errorf("stdout = %q, want %q", res.stdout, tt.stdout)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"submit", "--env", "FOO", "--", "true"}, `--env "FOO": want KEY=VALUE`},
		{[]string{"submit", "--env", "=1", "--", "true"}, `want KEY=VALUE`},
		{[]string{"submit", "--label", "=1", "--", "true"}, `--label "=1": want KEY=VALUE`},
		{[]string{"agent", "--server", "http://x", "--label", "rack"}, `--label "rack": want KEY=VALUE`},
		{[]string{"submit", "--gpus", "2"}, "missing the command"},
		{[]string{"submit", "--gpus", "two", "--", "true"}, "invalid argument"},
		{[]string{"submit", "--", ""}, "command to run is empty"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"queue", "--nope"}, "unknown flag"},
		{[]string{"queue", "a1", "a2"}, "too many arguments"}, // one is an array id (arrays.go)
		{[]string{"array", "throttle", "a1", "x"}, "want a whole number"},
		{[]string{"array", "throttle", "a1"}, "N"},
		{[]string{"run", "--array", "0-3", "--", "true"}, "corral submit --array"},
		{[]string{"show"}, "missing the job ID"},
		{[]string{"cancel"}, "missing the job ID"},
		{[]string{"cancel", "a", "--name", "sweep"}, "not both"},
		{[]string{"cancel", "--state", "completed"}, `--state "completed"`},
		{[]string{"cancel", "--state", "sleeping"}, `--state "sleeping"`},
		{[]string{"jobs", "--state", "sleeping"}, `--state "sleeping"`},
		{[]string{"jobs", "--since", "yesterday"}, "--since"},
		{[]string{"-o", "yaml", "queue"}, `--output "yaml"`},
		{[]string{"--server", "ftp://x", "queue"}, "--server"},
		{[]string{"policy", "set"}, "nothing to set"},
		{[]string{"policy", "set", "fcfs", "--policy", "sjf"}, "given twice"},
		{[]string{"policy", "bogus"}, `unknown command "bogus"`},
		{[]string{"priority", "01J", "urgent"}, "not one of low"},
		{[]string{"orchestrator", "pause"}, `unknown command "pause"`},
		{[]string{"-o", "json", "usage", "--csv"}, "--csv and -o json"},
		{[]string{"reserve", "show"}, "missing the booking's name"},
		{[]string{"whoami", "me"}, "too many arguments"},
		{[]string{"wait"}, "missing the job IDs"},
		{[]string{"login", "a", "b"}, "want at most one server"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFakeServer(t)
			res := f.run(tt.args...)
			if res.code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", res.code, res.stderr)
			}
			if !strings.HasPrefix(res.stderr, "corral: ") || !strings.Contains(res.stderr, tt.msg) {
				t.Errorf("stderr = %q, want corral: ...%s...", res.stderr, tt.msg)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("a usage error sent %d requests", n)
			}
		})
	}
}

func TestQueueTable(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/queue", 200, sampleQueue())
	f.on("GET", "/jobs", 200, api.JobList{})
	for _, long := range []bool{false, true} {
		args := []string{"queue"}
		if long {
			args = append(args, "-l")
		}
		res := f.run(args...)
		if res.code != 0 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
		if len(lines) != 4 {
			t.Fatalf("got %d lines:\n%s", len(lines), res.stdout)
		}
		header := []string{"NUM", "POS", "ID", "USER", "PRI", "GPUS", "WAITED", "EST.START", "NAME"}
		if long {
			header = append(header, "REASON")
		}
		want := columnStarts(lines[0], header...)
		rows := [][]string{
			{"-", "1", "01JQUEUED1", "bob", "normal", "1", "3m12s", "in 4m10s", "short"},
			{"-", "2", "01JQUEUED2LO", "carol-the-long", "critical", "2x4", "5s", "-", "gang"},
		}
		if long {
			rows[0] = append(rows[0], "waiting for 1 free GPU")
			rows[1] = append(rows[1], "needs 2 nodes with 4 free GPUs")
		}
		for i, row := range rows {
			if got := columnStarts(lines[i+1], row...); !reflect.DeepEqual(got, want) {
				t.Errorf("row %d %q: columns at %v, header at %v\n%s", i, lines[i+1], got, want, res.stdout)
			}
		}
		if !strings.Contains(lines[3], "2 queued, 1 running") {
			t.Errorf("statistics line = %q", lines[3])
		}
	}
}

func TestJobsTableAndFilters(t *testing.T) {
	f := newFakeServer(t)
	running := sampleJob()
	running.ID, running.State, running.FinishedAt, running.ExitCode, running.CancelRequested = "01JRUN", api.StateRunning, nil, nil, true
	f.on("GET", "/jobs", 200, api.JobList{Jobs: []api.Job{sampleJob(), running}})
	res := f.run("jobs", "--state", "running", "--user", "alice", "--project", "vision", "--since", "2025-01-02T03:04:05Z", "--limit", "5", "--name", "train-resnet")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if q := f.last().Query; q != "limit=5&name=train-resnet&project=vision&since=2025-01-02T03%3A04%3A05Z&state=running&user=alice" {
		t.Errorf("query = %s", q)
	}
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	want := columnStarts(lines[0], "NUM", "ID", "NAME", "USER", "STATE", "RUNTIME")
	if got := columnStarts(lines[1], "-", "01JAAAAAAAAA", "train-resnet", "alice", "completed", "3m0s"); !reflect.DeepEqual(got, want) {
		t.Errorf("row %q: columns at %v, header at %v", lines[1], got, want)
	}
	if !strings.Contains(lines[2], "running (canceling)") {
		t.Errorf("running row = %q", lines[2])
	}

	res = f.run("jobs", "--since", "90m")
	if q := f.last().Query; res.code != 0 || !strings.HasPrefix(q, "mine=auto&since=") {
		t.Errorf("--since 90m: exit %d, query %q", res.code, q)
	}
}

func TestShow(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/jobs/01JAAAAAAAAAAAAAAAAAAAAAAA", 200, sampleJob())
	res := f.run("show", "01JAAAAAAAAAAAAAAAAAAAAAAA")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{
		"ID:", "01JAAAAAAAAAAAAAAAAAAAAAAA", "State:", "completed", "User:", "alice", "Project:", "vision",
		"Command:", "python train.py --lr 3e-4", "Env:", "1 variable (values: --env): SEED", "GPUs:", "Priority:", "high",
		"Runtime:", "3m0s", "Exit code:", "Allocation:", "node-a", "GPU-2222 (simulated)", "80 GB",
		"Events:", "* -> queued", "running -> completed", "exit code 0",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("show output lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestCancelAndLogs(t *testing.T) {
	f := newFakeServer(t)
	f.on("DELETE", "/queue/01JRUN", http.StatusAccepted, api.Job{ID: "01JRUN", State: api.StateRunning, CancelRequested: true, Priority: api.PriorityLow})
	f.on("DELETE", "/queue/01JQ", http.StatusOK, api.Job{ID: "01JQ", State: api.StateCanceled, Priority: api.PriorityLow})
	f.on("GET", "/jobs/01JRUN/logs", http.StatusOK, "epoch 1\nepoch 2\n")
	f.on("GET", "/jobs/01JRUN", http.StatusOK, api.Job{ID: "01JRUN", State: api.StateCompleted, RetryCount: 1, Priority: api.PriorityLow})

	res := f.run("cancel", "01JRUN", "--grace", "30s")
	if res.code != 0 || !strings.Contains(res.stdout, "canceling job 01JRUN") || !strings.Contains(res.stdout, "30s") {
		t.Errorf("cancel running: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if q := f.last().Query; q != "grace=30s" {
		t.Errorf("cancel query = %q", q)
	}
	res = f.run("cancel", "01JQ")
	if res.code != 0 || res.stdout != "canceled job 01JQ\n" || f.last().Query != "" {
		t.Errorf("cancel queued: exit %d, %q, query %q", res.code, res.stdout, f.last().Query)
	}
	res = f.run("logs", "-f", "01JRUN", "--attempt", "2")
	if res.code != 0 || res.stdout != "epoch 1\nepoch 2\n" {
		t.Errorf("logs: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if q := f.lastTo("/jobs/01JRUN/logs").Query; q != "attempt=2&follow=true" { // one base: attempt 2 is the API's and $CORRAL_ATTEMPT's 2
		t.Errorf("logs query = %q", q)
	}
	for _, tc := range []struct {
		args  []string
		query string
	}{
		{[]string{"--attempt", "0"}, "attempt=0"}, // the first run, not "the latest"
		{nil, ""}, // no flag: the latest
	} {
		res = f.run(append([]string{"logs", "01JRUN"}, tc.args...)...)
		if q := f.last().Query; res.code != 0 || q != tc.query {
			t.Errorf("logs %v: exit %d, query %q, want %q", tc.args, res.code, q, tc.query)
		}
	}
	if res = f.run("logs", "01JRUN", "--attempt", "-1"); res.code != 2 || !strings.Contains(res.stderr, "--attempt") {
		t.Errorf("logs --attempt -1: exit %d, %q", res.code, res.stderr)
	}
	res = f.run("logs", "01JNOPE")
	if res.code != 1 || !strings.Contains(res.stderr, "corral: no route") {
		t.Errorf("logs of a missing job: exit %d, %q", res.code, res.stderr)
	}
}

func TestPriority(t *testing.T) {
	f := newFakeServer(t)
	f.on("PATCH", "/queue/01JQ/priority", 200, api.Job{ID: "01JQ", State: api.StateQueued, Priority: api.PriorityCritical})
	res := f.run("priority", "01JQ", "critical")
	if res.code != 0 || res.stdout != "job 01JQ priority is now critical\n" {
		t.Errorf("exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if b := string(f.last().Body); b != `{"priority":"critical"}` {
		t.Errorf("body = %s", b)
	}
	// The server changes a running job's priority too (preemption victims
	// are chosen by it): the help must not say "queued" only.
	res = f.run("priority", "--help")
	if res.code != 0 || !strings.Contains(res.stdout, "running job") || !strings.Contains(res.stdout, "preemption") {
		t.Errorf("priority --help: exit %d, %q", res.code, res.stdout)
	}
}

func TestParseMemMiB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true}, {"0", 0, true}, {"512", 512, true}, {"512M", 512, true}, {"64G", 64 << 10, true},
		{"64GiB", 64 << 10, true}, {"64gb", 64 << 10, true}, {"1T", 1 << 20, true}, {"1.5G", 1536, true},
		{"-1G", 0, false}, {"lots", 0, false}, {"64X", 0, false}, {"NaNG", 0, false}, {"1e30G", 0, false},
	} {
		got, err := parseMemMiB(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseMemMiB(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
