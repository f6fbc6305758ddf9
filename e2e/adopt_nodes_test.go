package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A job of no GPUs on a cluster of two nodes survives a kill -9 of
// `corral server`: the restarted server adopts it on the node it runs on
// (the job records its node: node_id; its allocation names none), its
// process runs on, and it completes in its first attempt with its output.
// One on each node, so that neither is adopted by chance of being on the
// first.
func TestJobsWithoutGPUsAdoptedAfterServerKill(t *testing.T) {
	env := []string{"CORRAL_JOIN_TOKEN=" + joinToken}
	args := []string{"server", "--node-ttl", clusterTTL.String(), "--heartbeat", "300ms", "--retry-backoff", clusterBackoff.String()}
	dataDir, port := t.TempDir(), freePort(t)
	s := startControl(t, dataDir, port, env, args...)
	for _, n := range []string{"n1", "n2"} {
		startAgent(t, s, n, 1, "--label", "host="+n)
	}
	dir := t.TempDir()
	jobs := map[string]api.Job{}
	for _, n := range []string{"n1", "n2"} {
		j := s.submit(map[string]any{"command": "echo before-" + n + "; " + holdCmd(dir, n) + "; echo after-" + n,
			"gpu_count": 0, "node_labels": map[string]string{"host": n}})
		if j = s.waitState(j.ID, api.StateRunning, 30*time.Second); j.NodeID != n || len(j.Allocation) != 0 {
			t.Fatalf("job on %s: node_id %q, allocation %v; want node_id %s and no GPUs", n, j.NodeID, j.Allocation, n)
		}
		jobs[n] = j
	}

	s.kill9()
	s = startControl(t, dataDir, port, env, args...)
	for n, j := range jobs {
		if got := s.job(j.ID); got.State != api.StateRunning || got.RetryCount != 0 || got.NodeID != n {
			t.Fatalf("the job on %s after the restart: %s (%s: %s), retry %d, node_id %q; want running, adopted on %s",
				n, got.State, got.Reason, got.Message, got.RetryCount, got.NodeID, n)
		}
	}
	// Its agent confirms it: past a TTL of the new server's, the job
	// still runs in its first attempt (a job adopted on the wrong node, or
	// not at all, is lost within it).
	s.waitNode("n1", "up", 20*time.Second)
	s.waitNode("n2", "up", 20*time.Second)
	time.Sleep(clusterTTL + time.Second) // nothing to await: a loss would show within it
	for n := range jobs {
		release(t, dir, n)
	}
	for n, j := range jobs {
		got := s.waitState(j.ID, api.StateCompleted, 30*time.Second)
		if log := s.logs(j.ID); got.RetryCount != 0 || !strings.Contains(log, "before-"+n) || !strings.Contains(log, "after-"+n) {
			t.Errorf("the job on %s: retry %d, log %q; want it completed in its first attempt, its whole output", n, got.RetryCount, log)
		}
	}
}
