package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// An agent killed with SIGKILL and restarted at once with another data
// directory cannot adopt its predecessor's job, and the server settles the
// job as lost and retries it. The new agent kills the old attempt's
// processes before the retry runs: the TTL here is long, so the shim's
// fence would come far too late.
func TestAgentRestartedElsewhereKillsOrphans(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_JOIN_TOKEN=" + joinToken}, "server",
		"--node-ttl", "60s", "--heartbeat", "300ms", "--retry-backoff", "1s")
	a := startAgent(t, s, "n1", 2)
	dir := t.TempDir()
	j := s.submit(map[string]any{"command": pidsCmd(dir, "all"), "gpu_count": 1, "max_retries": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)
	var oldPID int
	waitFor(t, 10*time.Second, func() string { return "the first attempt to record its pid" }, func() bool {
		oldPID = readAttemptPID(dir, 0)
		return oldPID > 0
	})

	a.kill9()
	a.dataDir = t.TempDir()
	for i, arg := range a.args {
		if arg == "--data-dir" {
			a.args[i+1] = a.dataDir
		}
	}
	a.start()
	got := s.waitJob(j.ID, 20*time.Second, "to run its retry", func(j api.Job) bool {
		return j.State == api.StateRunning && j.RetryCount == 1
	})
	if !processGone(oldPID) {
		t.Fatalf("the retry runs while the first attempt (pid %d) still does", oldPID)
	}
	if !strings.Contains(a.out.String(), "killed the orphaned processes") {
		t.Errorf("the new agent did not say it killed the orphans:\n%s", a.out.String())
	}
	release(t, dir, "all")
	got = s.waitState(j.ID, api.StateCompleted, 20*time.Second)
	if got.RetryCount != 1 {
		t.Errorf("retry_count %d; want 1", got.RetryCount)
	}
}
