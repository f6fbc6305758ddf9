package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A job of no GPUs placed on a standalone agent holds no GPU, so its
// allocation names no node; its output must still reach the server from
// the node it ran on (once it was refused, "runs no job", and lost),
// and only from it.
func TestZeroGPUJobOnAgentKeepsItsOutput(t *testing.T) {
	s := startCluster(t)
	startAgent(t, s, "n1", 1)
	j := s.submit(map[string]any{"command": "echo cpu-only-output; echo to-stderr >&2", "gpu_count": 0})
	got := s.waitTerminal(j.ID, 20*time.Second)
	if got.State != api.StateCompleted {
		t.Fatalf("job ended %s (%s); want completed", got.State, got.Message)
	}
	waitFor(t, 10*time.Second, func() string { return "the 0-GPU job's output in its log: " + s.logs(j.ID) }, func() bool {
		out := s.logs(j.ID)
		return strings.Contains(out, "cpu-only-output") && strings.Contains(out, "to-stderr")
	})

	// Another node may not write into it.
	evil := &hostileAgent{s: s, node: "n2"}
	evil.register("evil-agent-0123456789", 1)
	size := int64(len(s.logs(j.ID)))
	r := evil.call("/agent/v1/logs", api.LogChunk{NodeID: "n2", JobID: j.ID, Offset: size, Data: []byte("forged\n")})
	if r.Status != 404 {
		t.Errorf("a chunk from a node the job never ran on: %s; want 404", r)
	}
	if out := s.logs(j.ID); strings.Contains(out, "forged") {
		t.Errorf("log %q holds another node's chunk", out)
	}
}
