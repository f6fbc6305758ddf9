package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The test binary doubles as the shim: with CORRAL_AGENT_TEST_SHIM=1 it
// runs RunShim, as `corral shim` does.
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_AGENT_TEST_SHIM") == "1" {
		os.Exit(RunShim(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// newTasks returns a standalone agent's task runner over dir, whose shims
// are this test binary.
func newTasks(t *testing.T, dir string, fence time.Duration) *tasks {
	t.Helper()
	t.Setenv("CORRAL_AGENT_TEST_SHIM", "1")
	return &tasks{stateDir: filepath.Join(dir, "state"), logDir: filepath.Join(dir, "logs"), nodeID: "n1", detach: true, runAs: RunAsAgent,
		shim: []string{os.Args[0]}, log: slog.New(slog.DiscardHandler), changed: func() {}, byKey: map[taskKey]*task{}, fence: fence}
}

// waitTask polls the task's status until cond holds.
func waitTask(t *testing.T, ts *tasks, what string, cond func(api.TaskStatus) bool) api.TaskStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, st := range ts.statuses() {
			if cond(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, ts.statuses())
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// A job's environment names its GPUs, rank and notice file; its output
// goes to the log; its exit code is reported.
func TestTaskEnvLogAndExit(t *testing.T) {
	dir := t.TempDir()
	ts := newTasks(t, dir, 0)
	os.MkdirAll(ts.stateDir, 0o755)
	ts.start(api.TaskSpec{JobID: "j1", Rank: 1, NumNodes: 2, MasterAddr: "10.0.0.7", MasterPort: 29555, GPUs: []int{2, 5},
		Env:     map[string]string{"MY_VAR": "hello"},
		Command: `echo "$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES $CORRAL_GPUS $CORRAL_NODE_RANK/$CORRAL_NUM_NODES $MASTER_ADDR:$MASTER_PORT $MY_VAR $CORRAL_PREEMPT_NOTICE"; exit 7`})
	st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 7 || st.Error != "" || st.StartedAt == nil {
		t.Errorf("status %+v; want exit 7, no error, a start time", st)
	}
	b, err := os.ReadFile(ts.logPath(taskKey{"j1", 0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	want := "2,5 2,5 2,5 1/2 10.0.0.7:29555 hello " + ts.noticePath(taskKey{"j1", 0, 1}) + "\n"
	if string(b) != want {
		t.Errorf("job output %q; want %q", b, want)
	}
}

// A shim whose agent stops touching the liveness file kills its job once
// the file is older than the fence, and says so; while the agent touches
// it, the job runs on.
func TestShimFencesItsJobWithoutAnAgent(t *testing.T) {
	dir := t.TempDir()
	fence := 400 * time.Millisecond
	ts := newTasks(t, dir, fence)
	os.MkdirAll(ts.stateDir, 0o755)
	touch := func() {
		if err := os.WriteFile(ts.alivePath(), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch()
	ts.start(api.TaskSpec{JobID: "j1", Command: "sleep 60"})
	st := waitTask(t, ts, "the job to run", func(s api.TaskStatus) bool { return s.PID > 0 })
	pid := st.PID
	// Three fences long, the agent keeps touching: the job must survive.
	for range 12 {
		touch()
		time.Sleep(fence / 4) // the agent's touch pacing
	}
	if !alive(pid) {
		t.Fatalf("job %d was fenced while its agent was alive", pid)
	}
	// The agent dies (no more touches): the job is fenced.
	st = waitTask(t, ts, "the job to be fenced", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if !strings.Contains(st.Error, "lost: no agent") || st.Signal != "killed" {
		t.Errorf("fenced job's status %+v; want a lost error naming the missing agent, SIGKILL", st)
	}
	if alive(pid) {
		t.Errorf("job %d still runs after its fence", pid)
	}
}

// A new agent over the same state directory adopts a running task (same
// pid, not restarted) and reports its real end.
func TestAdoptRunningTask(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	first := newTasks(t, dir, 0)
	os.MkdirAll(first.stateDir, 0o755)
	first.start(api.TaskSpec{JobID: "j1", Attempt: 2, Command: "echo before; while [ ! -e " + release + " ]; do sleep 0.02; done; echo after; exit 3"})
	pid := waitTask(t, first, "the job to run", func(s api.TaskStatus) bool { return s.PID > 0 }).PID

	// The first agent is gone (its tasks struct is dropped; the shim, in
	// its own session, runs on). A second one adopts.
	second := newTasks(t, dir, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := second.adopt(ctx); n != 1 {
		t.Fatalf("adopted %d tasks; want 1", n)
	}
	if st := second.statuses(); len(st) != 1 || st[0].State != api.TaskRunning || st[0].PID != pid || st[0].Attempt != 2 {
		t.Fatalf("adopted %+v; want attempt 2 running as pid %d", st, pid)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := waitTask(t, second, "the adopted job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 3 || st.Error != "" {
		t.Errorf("adopted job ended %+v; want exit 3", st)
	}
	b, _ := os.ReadFile(second.logPath(taskKey{"j1", 2, 0}))
	if string(b) != "before\nafter\n" {
		t.Errorf("log %q; want the output from before and after the adoption", b)
	}
}

// A job given GPUs with MIG on gets their MIG devices' UUIDs in
// CORRAL_MIG_DEVICES, in the order of its GPUs; a job without such a GPU
// gets no such variable.
func TestJobEnvNamesMIGDevices(t *testing.T) {
	ts := &tasks{nodeID: "n1", stateDir: t.TempDir(),
		migs: map[int][]api.MIGDevice{1: {{UUID: "MIG-1a"}, {UUID: "MIG-1b"}}, 3: {{UUID: "MIG-3a"}}}}
	for _, tc := range []struct {
		gpus []int
		want string
	}{
		{[]int{3, 1}, "MIG-3a,MIG-1a,MIG-1b"},
		{[]int{0, 1}, "MIG-1a,MIG-1b"},
		{[]int{0, 2}, ""},
	} {
		got, set := "", false
		for _, kv := range ts.env(api.TaskSpec{JobID: "j1", GPUs: tc.gpus}, nil) {
			if v, ok := strings.CutPrefix(kv, "CORRAL_MIG_DEVICES="); ok {
				got, set = v, true
			}
		}
		if got != tc.want || set != (tc.want != "") {
			t.Errorf("GPUs %v: CORRAL_MIG_DEVICES %q (set %v), want %q", tc.gpus, got, set, tc.want)
		}
	}
}
