package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestBulkCancelAndPrefixes: a job is named by a unique 8-character prefix
// of its id (corral show, corral cancel); a prefix several ids start with
// is refused as ambiguous. corral cancel --name selects the 12 unfinished
// jobs of that name, refuses without --yes (cancelling nothing), and
// cancels all 12 with it, leaving other jobs alone.
func TestBulkCancelAndPrefixes(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}

	solo := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 1, "name": "solo", "workdir": "/tmp"})
	prefix := solo.ID[:8]
	stdout, stderr, code := runCLI(t, env, "show", prefix)
	if code != 0 || !strings.Contains(stdout, solo.ID) {
		t.Fatalf("corral show %s: exit %d, %q %q", prefix, code, truncate(stdout, 300), stderr)
	}

	var sweep []string
	for range 12 {
		sweep = append(sweep, s.submit(map[string]any{"command": "sleep 600", "gpu_count": 1, "name": "sweep", "workdir": "/tmp"}).ID)
	}
	if n := commonLen(sweep[0], sweep[11]); n >= 6 {
		shared := sweep[0][:n]
		_, stderr, code = runCLI(t, env, "show", shared)
		if code != 1 || !strings.Contains(stderr, "12 jobs") && !strings.Contains(stderr, "jobs' ids") {
			t.Errorf("corral show %s (ambiguous): exit %d, %q", shared, code, stderr)
		}
	}

	stdout, stderr, code = runCLI(t, env, "cancel", "--name", "sweep")
	if code != 1 || !strings.Contains(stderr, "--yes") || !strings.Contains(stderr, "12 jobs") {
		t.Errorf("cancel --name sweep without --yes: exit %d, %q %q", code, stdout, stderr)
	}
	for _, id := range sweep {
		if j := s.job(id); j.State.Terminal() || j.CancelRequested {
			t.Fatalf("cancel without --yes touched %s: %s", id, j.State)
		}
	}

	stdout, stderr, code = runCLI(t, env, "cancel", "--name", "sweep", "--yes", "--grace", "1s")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 13 || lines[12] != "12 of 12 jobs canceled or being stopped, 0 failed" {
		t.Fatalf("cancel --name sweep --yes: exit %d, %q %q", code, stdout, stderr)
	}
	for _, id := range sweep {
		if j := s.waitTerminal(id, 30*time.Second); j.State != api.StateCanceled {
			t.Errorf("%s ended %s, want canceled", id, j.State)
		}
	}
	if j := s.job(solo.ID); j.State.Terminal() || j.CancelRequested {
		t.Errorf("cancel --name sweep touched the solo job: %s", j.State)
	}

	short := solo.ID[:12] // what corral jobs shows
	if _, stderr, code = runCLI(t, env, "cancel", short, "--grace", "1s"); code != 0 {
		t.Fatalf("corral cancel %s: exit %d, %q", short, code, stderr)
	}
	if j := s.waitTerminal(solo.ID, 30*time.Second); j.State != api.StateCanceled {
		t.Errorf("solo ended %s, want canceled", j.State)
	}
}

func commonLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
