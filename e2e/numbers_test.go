package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestNumbersSurviveKillNine: jobs get numbers 1, 2, 3 (an array one
// number, its tasks N_I); after `corral up` is killed with SIGKILL and
// started again on the same data dir, numbers go on from the last one;
// the CLI takes a number, a task and a name where it takes an id, lists
// numbers first, and completes ids to them.
func TestNumbersSurviveKillNine(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	// 8 GPUs each: one runs, the rest wait.
	first := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 8, "name": "first"})
	second := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 8, "name": "second"})
	arr := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 8, "name": "sweep", "array": "0-3"})
	if first.Number != 1 || second.Number != 2 || arr.Number != 3 {
		t.Fatalf("numbers %d, %d, %d; want 1, 2, 3", first.Number, second.Number, arr.Number)
	}

	s.kill9()
	s = startServerAt(t, s.DataDir, s.Port)
	fourth := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 8, "name": "fourth"})
	if fourth.Number != 4 {
		t.Fatalf("after kill -9 and a restart: number %d; want 4", fourth.Number)
	}

	out, errOut, code := runCLI(t, env, "cancel", "2")
	if code != 0 || !strings.Contains(out, second.ID) {
		t.Fatalf("corral cancel 2: exit %d, %q %q", code, out, errOut)
	}
	// Job 2 may have started by now (job 1, killed while starting, is
	// lost at the restart): a running job's cancel is answered 202 and
	// ends once its agent has stopped it, so wait for that.
	s.waitState(second.ID, api.StateCanceled, 30*time.Second)
	out, errOut, code = runCLI(t, env, "-o", "json", "show", "3_2")
	var task api.Job
	if code != 0 || json.Unmarshal([]byte(out), &task) != nil || task.ID != arr.ArrayJobID+"_2" || task.Number != 3 {
		t.Fatalf("corral show 3_2: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, env, "-o", "json", "show", "fourth") // the admin's own job's name
	var named api.Job
	if code != 0 || json.Unmarshal([]byte(out), &named) != nil || named.ID != fourth.ID {
		t.Fatalf("corral show fourth: exit %d, %q %q", code, out, errOut)
	}

	out, errOut, code = runCLI(t, env, "jobs", "--expand")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], "NUM ") || !strings.HasPrefix(lines[1], "4 ") {
		t.Fatalf("corral jobs: exit %d, %q %q; want NUM first, the newest (4) on top", code, out, errOut)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, code = runCLI(t, env, "__complete", "cancel", "")
		if code == 0 && strings.Contains(out, "4\tfourth (queued)") && strings.Contains(out, "3\tsweep (array, ") && !strings.Contains(out, "2\t") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("corral __complete cancel: exit %d, %q %q", code, out, errOut)
		}
		time.Sleep(100 * time.Millisecond) // poll: job 1 may still be starting
	}
}
