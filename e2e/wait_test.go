package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// cliProc is a corral CLI process started in the background, its output
// readable while it runs.
type cliProc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
}

// startCLI starts the corral binary against s with the admin token.
func startCLI(t *testing.T, s *server, args ...string) *cliProc {
	t.Helper()
	p := &cliProc{cmd: exec.Command(corralBin, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Env = cleanEnv("CORRAL_TOKEN="+adminToken, "CORRAL_SERVER="+s.URL, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "client.json"))
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("corral %v: %v", args, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *cliProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *cliProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("corral %v did not exit within %s; stdout %q, stderr %q", p.cmd.Args[1:], timeout, p.stdout.String(), p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// cliAt runs the corral binary against s and returns its output and exit code.
func cliAt(t *testing.T, s *server, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, args...)
}

// TestRunExitCodeStreamsOutput: corral run streams the job's output while
// it runs (the first line shows up before the job goes on) and exits with
// the job's exit code, each line once.
func TestRunExitCodeStreamsOutput(t *testing.T) {
	s := startServer(t)
	go_ := filepath.Join(t.TempDir(), "go")
	p := startCLI(t, s, "run", "--name", "run-exit-7", "--",
		"echo first; while [ ! -f "+shellQuote(go_)+" ]; do sleep 0.05; done; echo second; exit 7")
	waitFor(t, 30*time.Second, func() string { return "corral run to print the first line; stderr " + p.stderr.String() }, func() bool {
		return strings.Contains(p.stdout.String(), "first\n")
	})
	if p.exited() {
		t.Fatalf("corral run exited before the job went on: stdout %q", p.stdout.String())
	}
	if err := os.WriteFile(go_, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 7 {
		t.Errorf("corral run of a job exiting 7 exited %d; stderr %q", code, p.stderr.String())
	}
	if out := p.stdout.String(); out != "first\nsecond\n" {
		t.Errorf("corral run printed %q, want %q", out, "first\nsecond\n")
	}
	if !strings.Contains(p.stderr.String(), "exit 7") {
		t.Errorf("corral run's stderr does not say how the job ended: %q", p.stderr.String())
	}
}

// TestRunCtrlCCancelsThenDetaches: the first SIGINT cancels the job and
// corral run exits 130 once it is canceled.
func TestRunCtrlCCancels(t *testing.T) {
	s := startServer(t)
	p := startCLI(t, s, "run", "--", "echo started; sleep 60")
	waitFor(t, 30*time.Second, func() string { return "the job to start; stderr " + p.stderr.String() }, func() bool {
		return strings.Contains(p.stdout.String(), "started\n")
	})
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 130 {
		t.Errorf("corral run after Ctrl-C exited %d, want 130; stderr %q", code, p.stderr.String())
	}
	jobs := s.jobs()
	if len(jobs) != 1 || jobs[0].State != api.StateCanceled {
		t.Errorf("after Ctrl-C the job is %+v, want one canceled job", jobs)
	}
}

// TestRunSecondCtrlCDetaches: a second SIGINT leaves the job to the server
// and says how to reattach.
func TestRunSecondCtrlCDetaches(t *testing.T) {
	s := startServer(t)
	// The job ignores SIGTERM, so the cancel takes the whole grace period.
	p := startCLI(t, s, "run", "--", "trap '' TERM; echo started; sleep 60")
	waitFor(t, 30*time.Second, func() string { return "the job to start; stderr " + p.stderr.String() }, func() bool {
		return strings.Contains(p.stdout.String(), "started\n")
	})
	p.cmd.Process.Signal(syscall.SIGINT)
	waitFor(t, 10*time.Second, func() string { return "corral run to cancel; stderr " + p.stderr.String() }, func() bool {
		return strings.Contains(p.stderr.String(), "Ctrl-C again to detach")
	})
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 10*time.Second); code != 130 {
		t.Errorf("corral run after a second Ctrl-C exited %d, want 130", code)
	}
	jobs := s.jobs()
	if len(jobs) != 1 || !strings.Contains(p.stderr.String(), "corral logs -f "+jobs[0].ID) {
		t.Errorf("detaching does not say how to reattach: %q", p.stderr.String())
	}
}

// TestWaitSubmitWaitFailing: corral submit --wait of a job exiting 4 exits 4.
func TestWaitSubmitWaitFailing(t *testing.T) {
	s := startServer(t)
	stdout, stderr, code := cliAt(t, s, "submit", "--wait", "--", "exit 4")
	if code != 4 {
		t.Errorf("corral submit --wait of a job exiting 4 exited %d; stdout %q stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "submitted job") {
		t.Errorf("corral submit --wait did not print the submission: %q", stdout)
	}
	if _, _, code := cliAt(t, s, "submit", "--wait", "--", "true"); code != 0 {
		t.Errorf("corral submit --wait of a job that completes exited %d", code)
	}
}

// TestWaitCompletedFailedCanceled: corral wait exits 0 when all completed,
// else with the first (in the order given) other job's code: its own exit
// code when failed, 130 when canceled.
func TestWaitCompletedFailedCanceled(t *testing.T) {
	s := startServer(t)
	ok := s.submit(map[string]any{"command": "true", "gpu_count": 1})
	bad := s.submit(map[string]any{"command": "exit 5", "gpu_count": 1})
	gone := s.submit(map[string]any{"command": "sleep 60", "gpu_count": 1})
	s.waitState(gone.ID, api.StateRunning, 30*time.Second)

	// A wait started before the jobs end blocks until they do.
	p := startCLI(t, s, "wait", ok.ID, gone.ID)
	s.mustJSON("DELETE", "/queue/"+gone.ID, nil, 202, nil)
	if code := p.wait(t, 30*time.Second); code != 130 {
		t.Errorf("corral wait of completed + canceled exited %d, want 130; stderr %q", code, p.stderr.String())
	}
	for _, tc := range []struct {
		ids  []string
		want int
	}{
		{[]string{ok.ID}, 0},
		{[]string{ok.ID, bad.ID, gone.ID}, 5},
		{[]string{gone.ID, bad.ID}, 130},
		{[]string{bad.ID, ok.ID}, 5},
	} {
		stdout, stderr, code := cliAt(t, s, append([]string{"wait"}, tc.ids...)...)
		if code != tc.want {
			t.Errorf("corral wait %v exited %d, want %d; stdout %q stderr %q", tc.ids, code, tc.want, stdout, stderr)
		}
	}
	if stdout, _, _ := cliAt(t, s, "wait", ok.ID, bad.ID); !strings.Contains(stdout, bad.ID+" failed (exit 5") {
		t.Errorf("corral wait does not say how each job ended: %q", stdout)
	}
	if _, stderr, code := cliAt(t, s, "wait", "no-such-job"); code != 1 || !strings.Contains(stderr, "no-such-job") {
		t.Errorf("corral wait of an unknown job exited %d (%q), want 1 naming it", code, stderr)
	}
}

// TestLogsFollowExitCode: corral logs -f of a job exiting 3 prints its
// output and exits 3.
func TestLogsFollowExitCode(t *testing.T) {
	s := startServer(t)
	j := s.submit(map[string]any{"command": "echo out; sleep 1; exit 3", "gpu_count": 1})
	stdout, stderr, code := cliAt(t, s, "logs", "-f", j.ID)
	if code != 3 {
		t.Errorf("corral logs -f of a job exiting 3 exited %d; stderr %q", code, stderr)
	}
	if stdout != "out\n" {
		t.Errorf("corral logs -f printed %q, want %q", stdout, "out\n")
	}
	// Without -f it is a plain read: exit 0.
	if _, _, code := cliAt(t, s, "logs", j.ID); code != 0 {
		t.Errorf("corral logs (no -f) of a failed job exited %d, want 0", code)
	}
}

// TestWaitAcrossServerRestart: corral wait, corral logs -f and corral run
// ride out a kill -9 and restart of corral up on the same data directory:
// the jobs run on under their shims, are adopted by the restarted server,
// and exit 5 (6 for run's) once told; the CLIs exit the same, and the
// followed logs hold the output once.
func TestWaitAcrossServerRestart(t *testing.T) {
	s := startServer(t)
	gate := filepath.Join(t.TempDir(), "go")
	wait := "while [ ! -f " + shellQuote(gate) + " ]; do sleep 0.05; done; "
	j := s.submit(map[string]any{"max_retries": 1, "gpu_count": 1,
		"command": "echo first; " + wait + "echo second; exit 5"})
	s.waitState(j.ID, api.StateRunning, 30*time.Second)
	waiter := startCLI(t, s, "wait", j.ID)
	follower := startCLI(t, s, "logs", "-f", j.ID)
	runner := startCLI(t, s, "run", "--max-retries", "1", "--", "echo once; "+wait+"echo again; exit 6")
	waitFor(t, 30*time.Second, func() string { return "logs -f and run to print the first attempt's line" }, func() bool {
		return strings.Contains(follower.stdout.String(), "first\n") && strings.Contains(runner.stdout.String(), "once\n")
	})

	s.kill9()
	// Both ride out the outage instead of failing.
	waitFor(t, 30*time.Second, func() string { return "the CLIs to notice the lost server" }, func() bool {
		return strings.Contains(waiter.stderr.String(), "reconnecting") && strings.Contains(follower.stderr.String(), "reconnecting") &&
			strings.Contains(runner.stderr.String(), "reconnecting")
	})
	for _, p := range []*cliProc{waiter, follower, runner} {
		if p.exited() {
			t.Fatalf("corral %v exited when the server went away: %q", p.cmd.Args[1:], p.stderr.String())
		}
	}
	s2 := startServerAt(t, s.DataDir, s.Port)
	openGate(t, gate) // the jobs, adopted, end now (restart_test.go)

	if code := waiter.wait(t, 60*time.Second); code != 5 {
		t.Errorf("corral wait across a restart exited %d, want 5; stderr %q", code, waiter.stderr.String())
	}
	if code := follower.wait(t, 60*time.Second); code != 5 {
		t.Errorf("corral logs -f across a restart exited %d, want 5; stderr %q", code, follower.stderr.String())
	}
	if out := follower.stdout.String(); out != "first\nsecond\n" {
		t.Errorf("corral logs -f across a restart printed %q, want %q", out, "first\nsecond\n")
	}
	if code := runner.wait(t, 60*time.Second); code != 6 {
		t.Errorf("corral run across a restart exited %d, want 6; stderr %q", code, runner.stderr.String())
	}
	if out := runner.stdout.String(); out != "once\nagain\n" {
		t.Errorf("corral run across a restart printed %q, want %q", out, "once\nagain\n")
	}
	got := s2.job(j.ID)
	for _, e := range got.Events {
		t.Logf("event %s -> %s (%s) %s", e.From, e.To, e.Reason, e.Message)
	}
	if got.RetryCount != 0 || got.State != api.StateFailed {
		t.Errorf("job after the restart: %s retry_count %d, want failed on its first attempt (adopted)", got.State, got.RetryCount)
	}
}
