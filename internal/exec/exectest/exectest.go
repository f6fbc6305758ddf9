// Package exectest is the conformance suite of exec.Executor: one set of
// expectations (start, exit codes, stop with grace, the preemption
// notice, gang ranks, lost attempts, adoption after a restart) run
// against every executor (agents, Slurm, Ray) through a Harness.
//
//	func TestConformance(t *testing.T) {
//		exectest.Run(t, func(t *testing.T) *exectest.Harness { ... })
//	}
package exectest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

// Harness is one executor under test and what the suite needs around it.
// New (Run's argument) makes a fresh one for each case.
type Harness struct {
	// Exec is the executor; its sink must feed Updates.
	Exec exec.Executor
	// Updates receives every update Exec sends, in order.
	Updates *Updates
	// Place returns the ranks of an attempt over n nodes with gpus GPUs
	// each, or false when the executor has fewer nodes.
	Place func(nodes, gpus int) ([]exec.Rank, bool)
	// Dir is a directory the jobs can read and write, on every node: logs
	// and notices go under Dir/logs/JOB/ATTEMPT.log and .preempt, as the
	// orchestrator lays them out.
	Dir string
	// Restart stands for a server restart: it returns a new executor
	// (what was running keeps running) whose sink feeds the same Updates.
	// nil: adoption is not tested.
	Restart func(t *testing.T) exec.Executor
	// Timeout bounds each wait for an update; default 60s.
	Timeout time.Duration
	// OwnEnvReaches, when not empty, says why a variable of the
	// executor's own process environment reaches its jobs (Ray: the
	// worker's environment is the base of the entrypoint's): the env case
	// then checks only that the job's own environment arrives.
	OwnEnvReaches string
}

// ownSecret is a variable the env case sets in the executor's own
// process environment (the server's, an in-process agent's): as an
// admin's AWS_SECRET_ACCESS_KEY, it must not reach a job.
const ownSecret = "EXECTEST_OWN_SECRET"

// Updates collects a sink's updates; Sink is the exec.Sink to give the
// executor.
type Updates struct {
	mu   sync.Mutex
	us   []exec.Update
	wake chan struct{}
}

// NewUpdates returns an empty collector.
func NewUpdates() *Updates { return &Updates{wake: make(chan struct{})} }

// Sink records u. It never blocks.
func (u *Updates) Sink(x exec.Update) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.us = append(u.us, x)
	close(u.wake)
	u.wake = make(chan struct{})
}

// of returns the updates of one attempt.
func (u *Updates) of(job string, attempt int) ([]exec.Update, chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []exec.Update
	for _, x := range u.us {
		if x.JobID == job && x.Attempt == attempt {
			out = append(out, x)
		}
	}
	return out, u.wake
}

// WaitExited blocks until attempt 0 of job has an Exited update, or
// timeout; it reports whether it came (benchmarks and harnesses).
func (u *Updates) WaitExited(job string, timeout time.Duration) bool {
	return u.Wait(job, 0, timeout, has(exec.Exited))
}

// Wait blocks until cond holds for the updates of the job's attempt, or
// timeout; it reports whether it did.
func (u *Updates) Wait(job string, attempt int, timeout time.Duration, cond func([]exec.Update) bool) bool {
	deadline := time.After(timeout)
	for {
		us, wake := u.of(job, attempt)
		if cond(us) {
			return true
		}
		select {
		case <-wake:
		case <-deadline:
			return false
		}
	}
}

// wait returns the attempt's updates once cond holds for them.
func (h *Harness) wait(t *testing.T, job string, attempt int, what string, cond func([]exec.Update) bool) []exec.Update {
	t.Helper()
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	deadline := time.After(timeout)
	for {
		us, wake := h.Updates.of(job, attempt)
		if cond(us) {
			return us
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("job %s attempt %d: no %s within %s; updates %+v", job, attempt, what, timeout, us)
		}
	}
}

func has(kind exec.UpdateKind) func([]exec.Update) bool {
	return func(us []exec.Update) bool {
		for _, u := range us {
			if u.Kind == kind {
				return true
			}
		}
		return false
	}
}

// exited waits for the attempt's Exited and checks that one Started came
// first (unless the attempt was lost) and nothing else.
func (h *Harness) exited(t *testing.T, task exec.Task) exec.Update {
	t.Helper()
	us := h.wait(t, task.JobID, task.Attempt, "Exited", has(exec.Exited))
	last := us[len(us)-1]
	if last.Kind != exec.Exited {
		t.Fatalf("updates %+v: Exited is not the last", us)
	}
	starts := 0
	for _, u := range us[:len(us)-1] {
		if u.Kind != exec.Started {
			t.Errorf("update %+v before Exited", u)
		}
		starts++
	}
	if last.Lost == "" && starts != 1 {
		t.Errorf("%d Started before Exited, want 1: %+v", starts, us)
	}
	return last
}

// task is an attempt of job over nodes.
func (h *Harness) task(t *testing.T, job, command string, nodes int) exec.Task {
	t.Helper()
	ranks, ok := h.Place(nodes, 1)
	if !ok {
		t.Skipf("the executor has fewer than %d nodes", nodes)
	}
	dir := filepath.Join(h.Dir, "logs", job)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tk := exec.Task{JobID: job, Command: command, Ranks: ranks, Env: map[string]string{"CONFORMANCE": "yes"},
		LogPath: filepath.Join(dir, "0.log"), NoticePath: filepath.Join(dir, "0.preempt")}
	tk.NodeID, tk.GPUs, tk.GPUUUIDs = ranks[0].NodeID, ranks[0].GPUs, ranks[0].GPUUUIDs
	return tk
}

// log returns what rank 0 of the attempt wrote.
func (h *Harness) log(task exec.Task) string {
	b, _ := os.ReadFile(task.LogPath)
	return string(b)
}

// waitLog waits until rank 0's log holds s.
func (h *Harness) waitLog(t *testing.T, task exec.Task, s string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(h.log(task), s) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %q not in its log within 60s: %q", task.JobID, s, h.log(task))
		}
		time.Sleep(50 * time.Millisecond) // the log is a file: polled
	}
}

var jobSeq struct {
	sync.Mutex
	n int
}

// jobID returns a fresh job id: runs of the suite against one Slurm must
// not meet each other's attempts.
func jobID(name string) string {
	jobSeq.Lock()
	defer jobSeq.Unlock()
	jobSeq.n++
	return fmt.Sprintf("conf%d%s%d", time.Now().UnixNano()%1e9, name, jobSeq.n)
}

// Run runs the suite: each case gets a fresh Harness from newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) *Harness) {
	ctx := context.Background()
	t.Run("exit codes", func(t *testing.T) {
		h := newHarness(t)
		for _, code := range []int{0, 3} {
			tk := h.task(t, jobID("exit"), fmt.Sprintf(`echo "out $CONFORMANCE"; exit %d`, code), 1)
			if err := h.Exec.Start(ctx, tk); err != nil {
				t.Fatal(err)
			}
			u := h.exited(t, tk)
			if u.ExitCode != code || u.Lost != "" || u.Err != nil {
				t.Errorf("exit %d: Exited %+v", code, u)
			}
			if !strings.Contains(h.log(tk), "out yes") {
				t.Errorf("log %q: want the job's output with its env", h.log(tk))
			}
		}
	})
	t.Run("batch script", func(t *testing.T) {
		// A batch script runs by its own #! line with the
		// command as its arguments, and exits as it does.
		h := newHarness(t)
		tk := h.task(t, jobID("script"), `'a b' c`, 1)
		tk.Script = "#!/bin/sh\n# CORRAL_SCRIPT_EOF in the text must not end it\necho \"script $# $1 $CONFORMANCE\"\nexit 5\n"
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if u := h.exited(t, tk); u.ExitCode != 5 || u.Err != nil {
			t.Errorf("Exited %+v, want the script's exit 5", u)
		}
		if !strings.Contains(h.log(tk), "script 2 a b yes") {
			t.Errorf("log %q: want the script's output, its arguments as given", h.log(tk))
		}
	})
	t.Run("env", func(t *testing.T) {
		// The job's environment reaches it, values verbatim
		// (quotes, $, a newline); the executor's own environment does
		// not, except where the engine cannot keep it out (a reason).
		h := newHarness(t)
		t.Setenv(ownSecret, "the-executors-own-value")
		tricky := "it's \"q\" $HOME `x` \\ a\nb"
		tk := h.task(t, jobID("env"), `printf 'job=%s tricky=[%s] own=%s home=%s\n' "$CONFORMANCE" "$TRICKY" "${`+ownSecret+`:-unset}" "${HOME:+set}"`, 1)
		tk.Env["TRICKY"] = tricky
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if u := h.exited(t, tk); u.ExitCode != 0 || u.Err != nil {
			t.Fatalf("Exited %+v, log %q", u, h.log(tk))
		}
		log := h.log(tk)
		if !strings.Contains(log, "job=yes tricky=["+tricky+"]") {
			t.Errorf("log %q: want the job's env, TRICKY verbatim", log)
		}
		if h.OwnEnvReaches != "" {
			t.Skipf("the executor's own environment reaches its jobs: %s", h.OwnEnvReaches)
		}
		if !strings.Contains(log, "own=unset home=set") {
			t.Errorf("log %q: want the executor's own %s unset and the account's HOME set", log, ownSecret)
		}
	})
	t.Run("time limit passes to the engine", func(t *testing.T) {
		// An executor takes a task with a time limit (Slurm sets its own
		// backstop --time from it); the orchestrator stops it at the limit.
		h := newHarness(t)
		tk := h.task(t, jobID("limit"), `echo limited`, 1)
		tk.TimeLimit = 5 * time.Second
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if u := h.exited(t, tk); u.ExitCode != 0 || u.Err != nil {
			t.Errorf("Exited %+v", u)
		}
	})
	t.Run("stop with grace", func(t *testing.T) {
		h := newHarness(t)
		tk := h.task(t, jobID("grace"), `trap 'echo got TERM; exit 0' TERM; echo ready; sleep 300 & wait`, 1)
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		h.wait(t, tk.JobID, 0, "Started", has(exec.Started))
		h.waitLog(t, tk, "ready")
		if err := h.Exec.Stop(ctx, tk.JobID, 0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		u := h.exited(t, tk)
		if u.ExitCode != 0 || !strings.Contains(h.log(tk), "got TERM") {
			t.Errorf("Exited %+v, log %q: want exit 0 from the TERM trap", u, h.log(tk))
		}
	})
	t.Run("stop kills after grace", func(t *testing.T) {
		h := newHarness(t)
		tk := h.task(t, jobID("kill"), `trap '' TERM; echo ready; sleep 300`, 1)
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		h.wait(t, tk.JobID, 0, "Started", has(exec.Started))
		h.waitLog(t, tk, "ready")
		if err := h.Exec.Stop(ctx, tk.JobID, 0, time.Second); err != nil {
			t.Fatal(err)
		}
		if u := h.exited(t, tk); u.ExitCode == 0 || u.Lost != "" {
			t.Errorf("Exited %+v: want killed", u)
		}
		if err := h.Exec.Stop(ctx, tk.JobID, 0, time.Second); err != nil {
			t.Errorf("Stop of an ended attempt: %v", err)
		}
	})
	t.Run("preemption notice", func(t *testing.T) {
		h := newHarness(t)
		n, ok := h.Exec.(exec.Noticer)
		if !ok {
			t.Skip("the executor is not an exec.Noticer")
		}
		tk := h.task(t, jobID("notice"), `trap 'echo "notice: $(cat "$CORRAL_PREEMPT_NOTICE")"; exit 0' TERM; echo ready; sleep 300 & wait`, 1)
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		h.wait(t, tk.JobID, 0, "Started", has(exec.Started))
		h.waitLog(t, tk, "ready")
		if err := n.Notice(ctx, tk.JobID, 0, "preempted for a critical job"); err != nil {
			t.Fatal(err)
		}
		if err := h.Exec.Stop(ctx, tk.JobID, 0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		h.exited(t, tk)
		if !strings.Contains(h.log(tk), "notice: preempted for a critical job") {
			t.Errorf("log %q: the job did not read the notice", h.log(tk))
		}
	})
	t.Run("gang ranks", func(t *testing.T) {
		h := newHarness(t)
		out := filepath.Join(h.Dir, "ranks")
		if err := os.MkdirAll(out, 0o777); err != nil {
			t.Fatal(err)
		}
		tk := h.task(t, jobID("gang"), fmt.Sprintf(`echo "rank=$CORRAL_NODE_RANK of=$CORRAL_NUM_NODES node=$CORRAL_NODE_ID master=$CORRAL_MASTER_ADDR:$CORRAL_MASTER_PORT" > %s/$CORRAL_NODE_RANK`, out), 2)
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if u := h.exited(t, tk); u.ExitCode != 0 {
			t.Fatalf("Exited %+v", u)
		}
		master := ""
		for r, rk := range tk.Ranks {
			b, err := os.ReadFile(filepath.Join(out, fmt.Sprint(r)))
			if err != nil {
				t.Fatalf("rank %d wrote nothing: %v", r, err)
			}
			line := strings.TrimSpace(string(b))
			if !strings.HasPrefix(line, fmt.Sprintf("rank=%d of=2 node=%s master=", r, rk.NodeID)) {
				t.Errorf("rank %d: %q", r, line)
			}
			_, m, _ := strings.Cut(line, "master=")
			if master != "" && m != master {
				t.Errorf("ranks disagree on the master: %q and %q", master, m)
			}
			master = m
		}
	})
	t.Run("lost attempt", func(t *testing.T) {
		h := newHarness(t)
		ex := h.Exec
		if h.Restart != nil {
			ex = h.Restart(t) // adoption happens as a server starts
		}
		a, ok := ex.(exec.Adopter)
		if !ok {
			t.Skip("the executor is not an exec.Adopter")
		}
		tk := h.task(t, jobID("lost"), "sleep 300", 1)
		if err := a.Adopt(ctx, tk); err != nil { // nothing runs it
			t.Fatal(err)
		}
		if u := h.exited(t, tk); u.Lost == "" {
			t.Errorf("Exited %+v: want lost", u)
		}
	})
	t.Run("adoption after a restart", func(t *testing.T) {
		h := newHarness(t)
		if h.Restart == nil {
			t.Skip("the harness cannot restart the executor")
		}
		tk := h.task(t, jobID("adopt"), `trap 'echo got TERM; exit 4' TERM; echo started; sleep 300 & wait`, 1)
		if err := h.Exec.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		h.wait(t, tk.JobID, 0, "Started", has(exec.Started))
		h.waitLog(t, tk, "started")
		ex := h.Restart(t)
		a, ok := ex.(exec.Adopter)
		if !ok {
			t.Skip("the executor is not an exec.Adopter")
		}
		if err := a.Adopt(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if err := ex.Stop(ctx, tk.JobID, 0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		us := h.wait(t, tk.JobID, 0, "Exited", has(exec.Exited))
		if u := us[len(us)-1]; u.Kind != exec.Exited || u.ExitCode != 4 || u.Lost != "" {
			t.Errorf("updates %+v: want Exited 4 from the adopted attempt", us)
		}
		if n := strings.Count(h.log(tk), "started"); n != 1 {
			t.Errorf("log %q: the attempt started %d times", h.log(tk), n)
		}
	})
}
