package e2e

import (
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestRunAsUser: an agent running as root runs each job as its owner's
// Unix account, and never as root; a job of a user without an account
// fails to start (strict is a synonym of user). Runs only as root.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent switches users")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this machine")
	}
	for _, mode := range []string{"user", "strict"} {
		s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "runas-node", "--run-as", mode)
		job := func(owner string) (api.Job, string) {
			t.Helper()
			j := s.submit(map[string]any{"user": owner, "gpu_count": 0, "workdir": "/", "command": "echo uid=$(id -u) gid=$(id -g)"})
			j = s.waitTerminal(j.ID, 30*time.Second)
			return j, s.logs(j.ID)
		}
		j, out := job("nobody")
		if j.State != api.StateCompleted || !strings.Contains(out, "uid="+nobody.Uid+" gid="+nobody.Gid) {
			t.Errorf("%s: nobody's job: %s %q, output %q; want uid=%s gid=%s", mode, j.State, j.Message, out, nobody.Uid, nobody.Gid)
		}
		j, _ = job("root")
		if j.State != api.StateFailed || j.Reason != api.ReasonStartFailed || !strings.Contains(j.Message, "root") {
			t.Errorf("%s: root's job: %s %s %q; want failed start_failed", mode, j.State, j.Reason, j.Message)
		}
		j, _ = job("no-such-user-here")
		if j.State != api.StateFailed || j.Reason != api.ReasonStartFailed || !strings.Contains(j.Message, "--run-as-fallback") {
			t.Errorf("%s: a job of a user without an account: %s %s %q; want failed start_failed naming --run-as-fallback", mode, j.State, j.Reason, j.Message)
		}
	}
}
