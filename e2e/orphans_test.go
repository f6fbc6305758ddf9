package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// An agent killed with SIGKILL and restarted at once with another data
// directory cannot adopt its predecessor's job. The server keeps the node
// for the old agent until the TTL has passed (node_in_use), then settles
// the job as lost and retries it, on the new agent. By then the old
// attempt is gone (fenced by its shim, or killed as an orphan by the new
// agent once it holds the node): the job never runs twice.
func TestAgentRestartedElsewhereNeverRunsTwice(t *testing.T) {
	s := startCluster(t)
	a := startAgent(t, s, "n1", 2)
	dir := t.TempDir()
	j := s.submit(map[string]any{"command": pidsCmd(dir, "all"), "gpu_count": 1, "max_retries": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)
	oldPID := waitAttemptPID(t, dir, 0)

	a.kill9()
	a.dataDir = t.TempDir()
	for i, arg := range a.args {
		if arg == "--data-dir" {
			a.args[i+1] = a.dataDir
		}
	}
	a.start()
	got := s.waitJob(j.ID, 30*time.Second, "to run its retry", func(j api.Job) bool {
		return j.State == api.StateRunning && j.RetryCount == 1
	})
	if !processGone(oldPID) {
		t.Fatalf("the retry runs while the first attempt (pid %d) still does", oldPID)
	}
	if got.Allocation[0].NodeID != "n1" {
		t.Errorf("retry on %s; want n1, the only node", got.Allocation[0].NodeID)
	}
	if !strings.Contains(a.out.String(), "held by another agent") {
		t.Errorf("the new agent was not told that the old one still held the node:\n%s", a.out.String())
	}
	release(t, dir, "all")
	got = s.waitState(j.ID, api.StateCompleted, 20*time.Second)
	if got.RetryCount != 1 {
		t.Errorf("retry_count %d; want 1", got.RetryCount)
	}
}

// A second agent started under a node id that a live agent holds is
// refused (node_in_use) and keeps out, so the node's jobs run once.
func TestSecondAgentForOneNodeIsRefused(t *testing.T) {
	s := startCluster(t)
	startAgent(t, s, "n1", 2)
	dup := &agentProc{t: t, s: s, name: "n1", dataDir: t.TempDir()}
	dup.args = []string{"agent", "--server", s.URL, "--node-name", "n1", "--data-dir", dup.dataDir, "--simulate-gpus", "2", "--interval", "300ms"}
	dup.launch()
	t.Cleanup(dup.stop)
	waitFor(t, 10*time.Second, func() string { return "the second agent to be refused" }, func() bool {
		return strings.Contains(dup.out.String(), "node_in_use") || strings.Contains(dup.out.String(), "held by another agent")
	})

	dir := t.TempDir()
	j := s.submit(map[string]any{"command": pidsCmd(dir, "all"), "gpu_count": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)
	release(t, dir, "all")
	s.waitState(j.ID, api.StateCompleted, 20*time.Second)
	if strings.Contains(dup.out.String(), "task started") {
		t.Errorf("the refused agent ran a task:\n%s", dup.out.String())
	}
}
