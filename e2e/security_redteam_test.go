package e2e

import (
	"strings"
	"testing"
)

// These tests repeat, as black-box regressions, the holes an adversarial
// pass over the real binary found after issue 10's fixes were merged.

// TestSecurityTerminalEscapesInTables: a job name or command that any user
// chooses, and a hostname or GPU model that any holder of the join token
// registers, reach the terminal of whoever runs corral jobs, show or nodes.
// They are printed with their control characters written out, so that they
// cannot retitle the window, clear the screen or overwrite other rows.
func TestSecurityTerminalEscapesInTables(t *testing.T) {
	s := startCluster(t)
	evil := "\x1b]0;pwned\x07\x1b[2J\u009b2Jevil"
	h := &hostileAgent{s: s, node: "evil-node"}
	r := h.call("/agent/v1/register", map[string]any{
		"node_id": h.node, "agent_id": "evil-agent-0123456789", "hostname": evil,
		"gpus":  []map[string]any{{"index": 0, "uuid": "GPU-evil-0", "model": evil, "memory_mib": 81920}},
		"tasks": []any{},
	})
	if r.Status != 200 {
		t.Fatalf("register: %s", r)
	}
	j := s.submit(map[string]any{"name": evil, "command": "echo " + evil, "gpu_count": 1, "workdir": "/tmp",
		"node_labels": map[string]string{"none": "such"}})
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, args := range [][]string{{"jobs"}, {"queue"}, {"show", j.ID}, {"nodes"}} {
		out, stderr, code := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("corral %v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(out, "evil") {
			t.Fatalf("corral %v does not show the hostile name at all:\n%s", args, out)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Errorf("corral %v prints control characters a name chose: %q", args, out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07`) {
			t.Errorf("corral %v does not write the escapes out visibly: %q", args, out)
		}
	}
}
