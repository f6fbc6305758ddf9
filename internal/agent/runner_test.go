package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

const testTimeout = 15 * time.Second

// harness runs tasks on a Runner and collects its updates.
type harness struct {
	t       *testing.T
	r       *Runner
	updates chan exec.Update
	dir     string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, updates: make(chan exec.Update, 64), dir: t.TempDir()}
	h.r = NewRunner(nil, func(u exec.Update) { h.updates <- u })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := h.r.StopAll(ctx, 0); err != nil {
			t.Errorf("StopAll: %v", err)
		}
	})
	return h
}

// task returns a task for job id running cmd, logging under the harness dir.
func (h *harness) task(id, cmd string) exec.Task {
	return exec.Task{
		JobID:   id,
		Attempt: 1,
		Command: cmd,
		NodeID:  "node-1",
		LogPath: filepath.Join(h.dir, "logs", id+".log"),
	}
}

// start starts t and returns its Started update.
func (h *harness) start(t exec.Task) exec.Update {
	h.t.Helper()
	if err := h.r.Start(context.Background(), t); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	u := h.next()
	if u.Kind != exec.Started || u.JobID != t.JobID || u.Attempt != t.Attempt || u.PID <= 0 || u.At.IsZero() {
		h.t.Fatalf("first update %+v, want Started of %s/%d with a pid", u, t.JobID, t.Attempt)
	}
	return u
}

// next returns the next update, failing after testTimeout.
func (h *harness) next() exec.Update {
	h.t.Helper()
	select {
	case u := <-h.updates:
		return u
	case <-time.After(testTimeout):
		h.t.Fatal("no update in time")
		return exec.Update{}
	}
}

// exited waits for the Exited update of t.
func (h *harness) exited(t exec.Task) exec.Update {
	h.t.Helper()
	u := h.next()
	if u.Kind != exec.Exited || u.JobID != t.JobID || u.Attempt != t.Attempt {
		h.t.Fatalf("update %+v, want Exited of %s/%d", u, t.JobID, t.Attempt)
	}
	return u
}

// run starts t and waits for it to exit.
func (h *harness) run(t exec.Task) exec.Update {
	h.t.Helper()
	h.start(t)
	return h.exited(t)
}

func readLog(t *testing.T, task exec.Task) string {
	t.Helper()
	b, err := os.ReadFile(task.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fifo makes a named pipe and returns its path and a channel that receives
// the first line a job writes to it.
func fifo(t *testing.T) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(path) // blocks until the job opens it for writing
		ch <- strings.TrimSpace(string(b))
	}()
	return path, ch
}

func recv(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(testTimeout):
		t.Fatal("job did not report in time")
		return ""
	}
}

// waitGone waits until pid is dead (gone, or a zombie: orphans are
// reparented to a PID 1 that may be slow to reap them).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !processDead(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func processDead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] == 'Z' || s[i+2] == 'X'
}

func TestEnvironmentAndWorkdir(t *testing.T) {
	t.Setenv("CORRAL_TEST_INHERITED", "from-agent")
	h := newHarness(t)
	workdir := t.TempDir()
	task := h.task("job-env", `
		echo "CVD=$CUDA_VISIBLE_DEVICES"
		echo "NVD=$NVIDIA_VISIBLE_DEVICES"
		echo "ORDER=$CUDA_DEVICE_ORDER"
		echo "JOB=$CORRAL_JOB_ID"
		echo "GPUS=$CORRAL_GPUS"
		echo "UUIDS=$CORRAL_GPU_UUIDS"
		echo "ATTEMPT=$CORRAL_ATTEMPT"
		echo "NODE=$CORRAL_NODE_ID"
		echo "MINE=$MY_VAR"
		echo "INHERITED=$CORRAL_TEST_INHERITED"
		echo "PWD=$(pwd -P)"
		echo "STDIN=$(cat)"
		echo to-stderr >&2`)
	task.Attempt = 3
	task.Workdir = workdir
	task.GPUs = []int{2, 0}
	task.GPUUUIDs = []string{"GPU-b", "GPU-a"}
	task.Env = map[string]string{"MY_VAR": "hello world", "CUDA_VISIBLE_DEVICES": "7", "CORRAL_JOB_ID": "spoof"}

	if u := h.run(task); u.ExitCode != 0 || u.Signal != "" || u.Err != nil {
		t.Fatalf("Exited %+v, want exit 0", u)
	}
	realWorkdir, err := filepath.EvalSymlinks(workdir)
	if err != nil {
		t.Fatal(err)
	}
	log := readLog(t, task)
	for _, want := range []string{
		"CVD=2,0\n", "NVD=2,0\n", "ORDER=PCI_BUS_ID\n", "JOB=job-env\n", "GPUS=2,0\n",
		"UUIDS=GPU-b,GPU-a\n", "ATTEMPT=3\n", "NODE=node-1\n", "MINE=hello world\n",
		"INHERITED=from-agent\n", "PWD=" + realWorkdir + "\n", "STDIN=\n", "to-stderr\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestNoGPUs(t *testing.T) {
	h := newHarness(t)
	task := h.task("job-cpu", `echo "CVD=${CUDA_VISIBLE_DEVICES-unset}" "NVD=$NVIDIA_VISIBLE_DEVICES" "GPUS=${CORRAL_GPUS-unset}"`)
	h.run(task)
	if log := readLog(t, task); log != "CVD= NVD=void GPUS=\n" {
		t.Errorf("log %q", log)
	}
}

func TestDefaultWorkdirAndAppend(t *testing.T) {
	h := newHarness(t)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cwd, _ = filepath.EvalSymlinks(cwd)
	task := h.task("job-cwd", `pwd -P`)
	h.run(task)
	task.Attempt = 2
	h.run(task)
	if log, want := readLog(t, task), cwd+"\n"+cwd+"\n"; log != want {
		t.Errorf("log %q, want %q (both attempts appended)", log, want)
	}
}

func TestExitCodes(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		cmd    string
		code   int
		signal string
	}{
		{"true", 0, ""},
		{"exit 3", 3, ""},
		{"false", 1, ""},
		{"no-such-command-xyz", 127, ""},
		{"kill -KILL $$", 137, "killed"},
		{"kill -TERM $$", 143, "terminated"},
	} {
		u := h.run(h.task("job-exit", tc.cmd))
		if u.ExitCode != tc.code || u.Signal != tc.signal || u.Err != nil {
			t.Errorf("%q: exit %d signal %q err %v, want %d %q", tc.cmd, u.ExitCode, u.Signal, u.Err, tc.code, tc.signal)
		}
	}
}

func TestStartErrors(t *testing.T) {
	h := newHarness(t)
	notDir := filepath.Join(h.dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*exec.Task)
		wantErr string
	}{
		{"missing workdir", func(t *exec.Task) { t.Workdir = "/nope/really" },
			`start job job-bad: workdir "/nope/really": no such file or directory`},
		{"workdir is a file", func(t *exec.Task) { t.Workdir = notDir },
			fmt.Sprintf("start job job-bad: workdir %q: not a directory", notDir)},
		{"empty command", func(t *exec.Task) { t.Command = "  " }, "start job job-bad: empty command"},
		{"bad env name", func(t *exec.Task) { t.Env = map[string]string{"A=B": "x"} }, `invalid variable name "A=B"`},
		{"log dir not creatable", func(t *exec.Task) { t.LogPath = filepath.Join(notDir, "x.log") }, "log directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := h.task("job-bad", "echo should-not-run")
			tc.edit(&task)
			err := h.r.Start(context.Background(), task)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Start error %v, want it to contain %q", err, tc.wantErr)
			}
			// Start sends Started before it returns, so an empty channel
			// now means no update at all.
			select {
			case u := <-h.updates:
				t.Fatalf("update %+v after a failed start", u)
			default:
			}
			if len(h.r.Running()) != 0 {
				t.Fatal("failed task listed as running")
			}
		})
	}
	// The reason is in the job's log, where its user looks.
	if log := readLog(t, h.task("job-bad", "")); !strings.Contains(log, `corral: start job job-bad: workdir "/nope/really"`) {
		t.Errorf("log %q lacks the start error", log)
	}
}

func TestDuplicateStart(t *testing.T) {
	h := newHarness(t)
	path, ready := fifo(t)
	task := h.task("job-dup", `echo up > "`+path+`"; exec sleep 1000`)
	h.start(task)
	recv(t, ready)
	if err := h.r.Start(context.Background(), task); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start: %v, want already running", err)
	}
	if err := h.r.Stop(context.Background(), "job-dup", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if u := h.exited(task); u.Signal != "terminated" {
		t.Errorf("Exited %+v", u)
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	h := newHarness(t)
	path, ready := fifo(t)
	// The shell traps TERM and carries on; its child ignores TERM.
	task := h.task("job-stubborn", `
		trap 'echo got-term' TERM
		sh -c "trap '' TERM; exec sleep 1000" &
		echo $! > "`+path+`"
		while :; do wait; done`)
	started := h.start(task)
	child, err := strconv.Atoi(recv(t, ready))
	if err != nil {
		t.Fatal(err)
	}
	if running := h.r.Running(); len(running) != 1 || running[0].PID != started.PID || running[0].JobID != "job-stubborn" {
		t.Fatalf("Running() = %+v", running)
	}

	const grace = 300 * time.Millisecond
	stopAt := time.Now()
	if err := h.r.Stop(context.Background(), "job-stubborn", 1, grace); err != nil {
		t.Fatal(err)
	}
	// A second Stop neither restarts nor shortens the deadline.
	if err := h.r.Stop(context.Background(), "job-stubborn", 1, 0); err != nil {
		t.Fatal(err)
	}
	u := h.exited(task)
	if elapsed := time.Since(stopAt); elapsed < grace {
		t.Errorf("killed after %v, before the %v grace period", elapsed, grace)
	}
	if u.Signal != "killed" || u.ExitCode != 137 {
		t.Errorf("Exited %+v, want killed/137", u)
	}
	if log := readLog(t, task); !strings.Contains(log, "got-term") {
		t.Errorf("log %q: SIGTERM did not come first", log)
	}
	waitGone(t, child)
	if len(h.r.Running()) != 0 {
		t.Errorf("Running() = %+v after exit", h.r.Running())
	}
}

func TestStopWithCooperativeJob(t *testing.T) {
	h := newHarness(t)
	path, ready := fifo(t)
	task := h.task("job-nice", `echo up > "`+path+`"; sleep 1000`)
	h.start(task)
	recv(t, ready)

	// Another attempt, or another job, is not touched.
	if err := h.r.Stop(context.Background(), "job-nice", 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Stop(context.Background(), "job-unknown", 1, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-h.updates:
		t.Fatalf("update %+v after stopping another attempt", u)
	default:
	}

	stopAt := time.Now()
	if err := h.r.Stop(context.Background(), "job-nice", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	u := h.exited(task)
	if u.Signal != "terminated" || u.ExitCode != 143 {
		t.Errorf("Exited %+v, want terminated/143", u)
	}
	if elapsed := time.Since(stopAt); elapsed > 10*time.Second {
		t.Errorf("took %v to stop", elapsed)
	}
	// Stopping it again once it is gone is fine.
	if err := h.r.Stop(context.Background(), "job-nice", 1, 0); err != nil {
		t.Fatal(err)
	}
}

func TestStragglersKilledAtExit(t *testing.T) {
	h := newHarness(t)
	pidFile := filepath.Join(h.dir, "straggler")
	task := h.task("job-straggler", `sleep 1000 & echo $! > "`+pidFile+`"; exit 0`)
	if u := h.run(task); u.ExitCode != 0 || u.Signal != "" {
		t.Fatalf("Exited %+v", u)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

func TestStopAll(t *testing.T) {
	h := newHarness(t)
	var tasks []exec.Task
	for i := range 3 {
		path, ready := fifo(t)
		task := h.task(fmt.Sprintf("job-all-%d", i), `trap '' TERM; echo up > "`+path+`"; sleep 1000`)
		h.start(task)
		recv(t, ready)
		tasks = append(tasks, task)
	}
	if n := len(h.r.Running()); n != 3 {
		t.Fatalf("Running() has %d tasks, want 3", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.r.StopAll(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// StopAll returns after every Exited update has been sent.
	for range tasks {
		select {
		case u := <-h.updates:
			if u.Kind != exec.Exited || u.Signal != "killed" {
				t.Errorf("update %+v", u)
			}
		default:
			t.Fatal("StopAll returned before all Exited updates")
		}
	}
	if n := len(h.r.Running()); n != 0 {
		t.Fatalf("Running() has %d tasks after StopAll", n)
	}
}

func TestKillGroupRefusesSpecialGroups(t *testing.T) {
	// killGroup refuses the pgids that would signal us or everyone.
	killGroup(NewRunner(nil, nil).logger, "x", 0, syscall.SIGKILL)
	killGroup(NewRunner(nil, nil).logger, "x", 1, syscall.SIGKILL)
	if err := syscall.Kill(os.Getpid(), 0); err != nil && !errors.Is(err, syscall.EPERM) {
		t.Fatal(err)
	}
}
