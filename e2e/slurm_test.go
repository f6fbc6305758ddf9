package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec/slurm/slurmtest"
)

// slurmUp brings the local Slurm of scripts/slurm-local.sh up (two nodes,
// corral-n1 and corral-n2, with two fake GPUs each) and returns the
// environment that points Slurm's commands at it. It skips the test when
// Slurm is not installed or the test does not run as root; a Slurm the
// test started is stopped in t.Cleanup.
func slurmUp(t *testing.T) []string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"SLURM_CONF=" + slurmtest.Up(t, filepath.Join(root, "scripts", "slurm-local.sh"), "corral-j")}
}

// slurmSays returns Slurm's record of a Corral attempt (found by its job
// name): squeue's state and scontrol's ExitCode ("code:signal").
func slurmSays(t *testing.T, env []string, jobID string, attempt int) (state, exit string) {
	t.Helper()
	run := func(args ...string) string {
		c := exec.Command(args[0], args[1:]...)
		c.Env = append(os.Environ(), env...)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	line := run("squeue", "-h", "-t", "all", fmt.Sprintf("--name=corral-%s-a%d", jobID, attempt), "-o", "%i|%T")
	id, state, ok := strings.Cut(line, "|")
	if !ok {
		t.Fatalf("squeue has no attempt %d of %s: %q", attempt, jobID, line)
	}
	for _, f := range strings.Fields(run("scontrol", "show", "-o", "job", id)) {
		if v, found := strings.CutPrefix(f, "ExitCode="); found {
			exit = v
		}
	}
	return state, exit
}

// TestSlurm points `corral server --executor slurm` at a real Slurm
// 22.05 and runs a one-node job, a two-node gang, a failing job, a
// canceled job and a preempted one; each ends in Corral as Slurm says.
func TestSlurm(t *testing.T) {
	env := slurmUp(t)
	dataDir, port := t.TempDir(), freePort(t)
	args := []string{"server", "--executor", "slurm", "--slurm-poll", "200ms", "--slurm-partition", "local"}
	s := startControl(t, dataDir, port, env, args...)
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("cluster %+v", s.cluster()) }, func() bool {
		return len(s.cluster().Nodes) == 2
	})
	for _, n := range s.cluster().Nodes {
		if n.GPUCount != 2 || n.Labels["pool"] != "slurm" {
			t.Fatalf("node %s: %d GPUs, labels %v; want 2 and pool=slurm", n.NodeID, n.GPUCount, n.Labels)
		}
	}

	t.Run("one node", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "rank=$CORRAL_NODE_RANK of $CORRAL_NUM_NODES node=$CORRAL_NODE_ID cuda=$CUDA_VISIBLE_DEVICES slurm=$SLURM_JOB_ID"`, "gpu_count": 2})
		j = s.waitState(j.ID, api.StateCompleted, 60*time.Second)
		logs := s.logs(j.ID)
		if !strings.Contains(logs, "rank=0 of 1 node="+j.Allocation[0].NodeID+" cuda=0,1 slurm=") {
			t.Errorf("logs %q: want rank 0 of 1 on %s with CUDA_VISIBLE_DEVICES=0,1 from Slurm", logs, j.Allocation[0].NodeID)
		}
		if state, exit := slurmSays(t, env, j.ID, 0); state != "COMPLETED" || exit != "0:0" || *j.ExitCode != 0 {
			t.Errorf("Slurm says %s %s; Corral %s exit %d", state, exit, j.State, *j.ExitCode)
		}
	})

	t.Run("two nodes", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "rank=$CORRAL_NODE_RANK node=$CORRAL_NODE_ID of=$CORRAL_NUM_NODES master=$CORRAL_MASTER_ADDR:$CORRAL_MASTER_PORT cuda=$CUDA_VISIBLE_DEVICES"`, "gpu_count": 1, "nodes": 2})
		j = s.waitState(j.ID, api.StateCompleted, 60*time.Second)
		logs := s.logs(j.ID)
		nodes := map[string]bool{}
		for _, a := range j.Allocation {
			nodes[a.NodeID] = true
		}
		if len(nodes) != 2 {
			t.Fatalf("allocation %+v: want two nodes", j.Allocation)
		}
		for r := range 2 {
			if !strings.Contains(logs, fmt.Sprintf("rank=%d node=", r)) || !strings.Contains(logs, "of=2 master=127.0.0.1:") {
				t.Errorf("logs %q: no line of rank %d of 2", logs, r)
			}
		}
		for n := range nodes {
			if !strings.Contains(logs, "node="+n+" ") {
				t.Errorf("logs %q: no rank on %s", logs, n)
			}
		}
		if state, exit := slurmSays(t, env, j.ID, 0); state != "COMPLETED" || exit != "0:0" {
			t.Errorf("Slurm says %s %s", state, exit)
		}
	})

	t.Run("failing", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": "echo failing; exit 3", "gpu_count": 1})
		j = s.waitState(j.ID, api.StateFailed, 60*time.Second)
		if j.ExitCode == nil || *j.ExitCode != 3 || j.Reason != api.ReasonExitCode {
			t.Errorf("job %s %s exit %v; want failed, exit_code, 3", j.State, j.Reason, j.ExitCode)
		}
		if state, exit := slurmSays(t, env, j.ID, 0); state != "FAILED" || exit != "3:0" {
			t.Errorf("Slurm says %s %s; want FAILED 3:0", state, exit)
		}
		if logs := s.logs(j.ID); !strings.Contains(logs, "failing") {
			t.Errorf("logs %q", logs)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		s := s.on(t)
		j := cancelRunning(t, s)
		if state, exit := slurmSays(t, env, j.ID, 0); state != "FAILED" || exit != "5:0" {
			t.Errorf("Slurm says %s %s; want FAILED 5:0 (the batch step exits with the job's status)", state, exit)
		}
	})

	t.Run("preempted", func(t *testing.T) {
		s := s.on(t)
		s.setPolicies(map[string]any{"policy": "priority", "preemption": true, "min_run_time": 0, "preempt_grace": "10s"}) // room for Slurm to deliver the TERM under load
		defer s.setPolicies(map[string]any{"preemption": false})
		low := s.submit(map[string]any{"command": `trap 'echo "notice: $(cat "$CORRAL_PREEMPT_NOTICE")"; exit 0' TERM; echo "attempt $CORRAL_ATTEMPT"; sleep 300 & wait`,
			"gpu_count": 2, "nodes": 2, "priority": "low"})
		s.waitState(low.ID, api.StateRunning, 60*time.Second)
		// Slurm runs the batch script before the ranks' step: a SIGTERM
		// before the step starts reaches no rank (the grace then ends it).
		waitFor(t, 30*time.Second, func() string { return "both ranks' first line" }, func() bool { return strings.Count(s.logs(low.ID), "attempt 0") == 2 })
		high := s.submit(map[string]any{"command": "echo high", "gpu_count": 2, "nodes": 2, "priority": "critical"})
		s.waitJob(low.ID, 60*time.Second, "to be preempted", func(j api.Job) bool { return j.Preemptions > 0 })
		s.waitState(high.ID, api.StateCompleted, 60*time.Second)
		if state, _ := slurmSays(t, env, low.ID, 0); state != "COMPLETED" {
			t.Errorf("Slurm says the preempted attempt ended %s; want COMPLETED (it exited 0 on SIGTERM)", state)
		}
		j := s.waitJob(low.ID, 60*time.Second, "to run again", func(j api.Job) bool { return j.State == api.StateRunning && j.RetryCount == 1 })
		if state, _ := slurmSays(t, env, j.ID, 1); state != "RUNNING" {
			t.Errorf("Slurm says attempt 1 is %s; want RUNNING", state)
		}
		// As for attempt 0: its ranks' step starts after the batch script.
		waitFor(t, 30*time.Second, func() string { return "attempt 1's ranks' first line" }, func() bool { return strings.Count(s.logs(low.ID), "attempt 1") == 2 })
		s.do("DELETE", "/queue/"+low.ID, nil, nil)
		s.waitTerminal(low.ID, 60*time.Second)
		first := s.do("GET", "/jobs/"+low.ID+"/logs?attempt=0", nil, nil)
		if logs := string(first.Body); first.Status != http.StatusOK || !strings.Contains(logs, "notice: ") {
			t.Errorf("attempt 0's logs %q: want the preemption notice", logs)
		}
	})

	t.Run("export runs on Slurm", func(t *testing.T) {
		s := s.on(t)
		s.do("POST", "/orchestrator/stop", nil, nil) // the job stays queued in Corral
		defer s.do("POST", "/orchestrator/start", nil, nil)
		dir := t.TempDir()
		j := s.submit(map[string]any{"name": "exported", "command": `echo "exported rank=$CORRAL_NODE_RANK of $CORRAL_NUM_NODES master=$CORRAL_MASTER_ADDR v=$V"`,
			"gpu_count": 1, "nodes": 2, "workdir": dir, "env": map[string]string{"V": "it's"}, "time_limit": "5m"})
		script, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "export", "slurm", j.ID)
		if code != 0 {
			t.Fatalf("corral export slurm: %d %s", code, stderr)
		}
		s.do("DELETE", "/queue/"+j.ID, nil, nil)
		path := filepath.Join(dir, "job.sbatch")
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		sb := exec.Command("sbatch", "--parsable", path)
		sb.Env = append(os.Environ(), env...)
		out, err := sb.CombinedOutput()
		if err != nil {
			t.Fatalf("sbatch of the exported script: %v %s\n%s", err, out, script)
		}
		id := strings.TrimSpace(string(out))
		var logs []byte
		waitFor(t, 60*time.Second, func() string { return "the exported job's output: " + string(logs) }, func() bool {
			logs, _ = os.ReadFile(filepath.Join(dir, "exported-"+id+".out"))
			return strings.Count(string(logs), "exported rank=") == 2
		})
		for r := range 2 {
			if want := fmt.Sprintf("exported rank=%d of 2 master=corral-n1 v=it's", r); !strings.Contains(string(logs), want) {
				t.Errorf("output %q lacks %q", logs, want)
			}
		}
	})

	t.Run("drained node", func(t *testing.T) {
		s := s.on(t)
		scontrol := func(args ...string) {
			c := exec.Command("scontrol", args...)
			c.Env = append(os.Environ(), env...)
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("scontrol %v: %v %s", args, err, out)
			}
		}
		nodeState := func() string {
			for _, n := range s.cluster().Nodes {
				if n.NodeID == "corral-n2" {
					return n.State
				}
			}
			return "absent"
		}
		scontrol("update", "nodename=corral-n2", "state=drain", "reason=corral e2e")
		defer func() { // resumed below, unless the test failed before
			c := exec.Command("scontrol", "update", "nodename=corral-n2", "state=resume")
			c.Env = append(os.Environ(), env...)
			c.Run()
		}()
		waitFor(t, 30*time.Second, func() string { return "corral-n2 " + nodeState() }, func() bool { return nodeState() == "cordoned" })
		j := s.submit(map[string]any{"command": "echo on $CORRAL_NODE_ID", "gpu_count": 1, "nodes": 2})
		time.Sleep(time.Second) // a second of scheduling cycles: the gang must not start
		if got := s.job(j.ID); got.State != api.StateQueued {
			t.Errorf("a two-node job with one node drained: %s, want queued", got.State)
		}
		scontrol("update", "nodename=corral-n2", "state=resume")
		waitFor(t, 30*time.Second, func() string { return "corral-n2 " + nodeState() }, func() bool { return nodeState() == "up" })
		s.waitState(j.ID, api.StateCompleted, 60*time.Second)
	})

	t.Run("server restart", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"command": `echo "first line"; while [ ! -e go ]; do sleep 0.2; done; echo "second line"`, "gpu_count": 1, "workdir": t.TempDir()})
		s.waitState(j.ID, api.StateRunning, 60*time.Second)
		waitFor(t, 30*time.Second, func() string { return "the job's first line" }, func() bool { return strings.Contains(s.logs(j.ID), "first line") })
		s.kill9()
		s2 := startControl(t, dataDir, port, env, args...).on(t)
		if got := s2.job(j.ID); got.State != api.StateRunning {
			t.Fatalf("after the restart the job is %s (%s), want running (adopted)", got.State, got.Message)
		}
		os.WriteFile(filepath.Join(j.Workdir, "go"), nil, 0o644)
		if j.Workdir == "" {
			t.Fatal("the job has no workdir")
		}
		done := s2.waitState(j.ID, api.StateCompleted, 60*time.Second)
		logs := s2.logs(j.ID)
		if strings.Count(logs, "first line") != 1 || !strings.Contains(logs, "second line") || done.RetryCount != 0 {
			t.Errorf("logs %q, retries %d: want one run of the attempt, adopted", logs, done.RetryCount)
		}
	})
}

// TestExecutorFlag: an unknown --executor, or a bad --slurm-* value, is a
// usage error naming the flag, before anything starts.
func TestExecutorFlag(t *testing.T) {
	for _, args := range [][]string{
		{"server", "--executor", "kubernetes"},
		{"server", "--executor", "slurm", "--slurm-bin", "/nonexistent/bin"},
		{"server", "--executor", "slurm", "--slurm-poll", "0s"},
	} {
		_, stderr, code := runCLI(t, nil, append(args, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")...)
		flag := args[len(args)-2]
		if code != 2 || !strings.Contains(stderr, flag) {
			t.Errorf("corral %v: exit %d, stderr %q; want 2 naming %s", args, code, stderr, flag)
		}
	}
}

// cancelRunning submits a one-GPU job that traps SIGTERM (echo, exit 5),
// cancels it once it runs, and checks that it ended canceled with its
// trap's exit code and output: an engine's stop is a SIGTERM first.
func cancelRunning(t *testing.T, s *server) api.Job {
	t.Helper()
	j := s.submit(map[string]any{"command": `trap 'echo got TERM; exit 5' TERM; echo started; sleep 300 & wait`, "gpu_count": 1})
	s.waitState(j.ID, api.StateRunning, 60*time.Second)
	waitFor(t, 30*time.Second, func() string { return "the job's first line" }, func() bool { return strings.Contains(s.logs(j.ID), "started") })
	s.do("DELETE", "/queue/"+j.ID, nil, nil)
	j = s.waitState(j.ID, api.StateCanceled, 60*time.Second)
	if j.ExitCode == nil || *j.ExitCode != 5 {
		t.Errorf("exit code %v; want 5 (the job's TERM trap)", j.ExitCode)
	}
	if logs := s.logs(j.ID); !strings.Contains(logs, "got TERM") {
		t.Errorf("logs %q: the job did not see SIGTERM", logs)
	}
	return j
}
