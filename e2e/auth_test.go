package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestTwoCommands: `corral up` with no token configured makes the admin
// token, keeps it in <data-dir>/admin.token (0600) and saves it for the
// local CLI, so `corral submit` right after works with nothing set.
func TestTwoCommands(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "client.json")
	env := []string{"CORRAL_ADMIN_TOKEN=", "CORRAL_CONFIG=" + cfg}
	s := startControl(t, t.TempDir(), freePort(t), env, "up", "--simulate-gpus", "2", "--node-name", "two-node")
	fi, err := os.Stat(filepath.Join(s.DataDir, "admin.token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token: %v, mode %v", err, fi.Mode())
	}
	if r := s.do("GET", "/queue", nil, map[string]string{"Authorization": ""}); r.Status != 401 {
		t.Fatalf("no token: %s", r)
	}
	stdout, stderr, code := runCLI(t, append(env, "CORRAL_TOKEN=", "CORRAL_SERVER="+s.URL), "submit", "-o", "json", "--gpus", "1", "--", "true")
	var j api.Job
	if code != 0 || json.Unmarshal([]byte(stdout), &j) != nil || j.ID == "" {
		t.Fatalf("corral submit with the saved token: exit %d, %s %s", code, stdout, stderr)
	}
	if !strings.Contains(s.out.String(), "dashboard: "+s.URL+"/?token=") {
		t.Errorf("corral up did not print the dashboard's sign-in link:\n%s", s.out.String())
	}
}

// TestTokensAndAudit drives tokens, roles and the audit trail through the
// CLI against a real server, across a restart.
func TestTokensAndAudit(t *testing.T) {
	s := startServer(t)
	cli := func(token string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + token}, args...)
	}
	stdout, stderr, code := cli(adminToken, "token", "create", "--user", "ana", "--project", "vision", "-o", "json")
	var ana api.NewToken
	if code != 0 || json.Unmarshal([]byte(stdout), &ana) != nil || ana.Secret == "" || ana.Role != api.RoleUser {
		t.Fatalf("token create: exit %d %s %s", code, stdout, stderr)
	}
	// ana submits as herself, to her project by default.
	stdout, stderr, code = cli(ana.Secret, "submit", "-o", "json", "--gpus", "0", "--", "sleep 30")
	var mine api.Job
	if code != 0 || json.Unmarshal([]byte(stdout), &mine) != nil || mine.User != "ana" || mine.Project != "vision" {
		t.Fatalf("ana's submit: exit %d %s %s", code, stdout, stderr)
	}
	// ana may not cancel the admin's job, nor change the policy.
	theirs := s.submit(map[string]any{"command": "sleep 30", "gpu_count": 0, "user": "bo"})
	if _, stderr, code := cli(ana.Secret, "cancel", theirs.ID); code != 1 || !strings.Contains(stderr, "belongs to bo") {
		t.Errorf("ana cancels bo's job: exit %d %s", code, stderr)
	}
	if _, stderr, code := cli(ana.Secret, "policy", "set", "fcfs"); code != 1 || !strings.Contains(stderr, "admin role") {
		t.Errorf("ana sets the policy: exit %d %s", code, stderr)
	}
	if _, stderr, code := cli(ana.Secret, "cancel", mine.ID); code != 0 {
		t.Errorf("ana cancels her own job: exit %d %s", code, stderr)
	}
	// Revoked: the next call fails.
	if _, stderr, code := cli(adminToken, "token", "revoke", ana.ID); code != 0 {
		t.Fatalf("revoke: exit %d %s", code, stderr)
	}
	if _, stderr, code := cli(ana.Secret, "jobs"); code != 1 || !strings.Contains(stderr, "not valid") {
		t.Errorf("revoked token: exit %d %s", code, stderr)
	}

	// The audit trail survives a restart; the revocation too.
	s.stop()
	s = startServerAt(t, s.DataDir, s.Port)
	stdout, stderr, code = cli(adminToken, "audit", "--user", "ana", "-o", "json")
	var l api.AuditList
	if code != 0 || json.Unmarshal([]byte(stdout), &l) != nil {
		t.Fatalf("audit: exit %d %s %s", code, stdout, stderr)
	}
	var actions []string
	for _, e := range l.Entries {
		actions = append(actions, e.Action+":"+itoa(e.Status))
	}
	want := "job.cancel:202 policy.set:403 job.cancel:403 job.submit:201"
	if got := strings.Join(actions, " "); got != want {
		t.Errorf("ana's audit trail after a restart: %s, want %s", got, want)
	}
	if _, _, code := cli(ana.Secret, "jobs"); code != 1 {
		t.Errorf("the revoked token works again after a restart")
	}
	if stdout, _, code := cli(adminToken, "audit", "--action", "token."); code != 0 || !strings.Contains(stdout, "token.revoke") || !strings.Contains(stdout, "token.create") {
		t.Errorf("corral audit --action token.: exit %d\n%s", code, stdout)
	}
}

// TestTimeLimitKills: a job past its time_limit is stopped and fails with
// reason time_limit.
func TestTimeLimitKills(t *testing.T) {
	s := startServer(t)
	j := s.submit(map[string]any{"command": "sleep 60", "gpu_count": 1, "time_limit": "1s"})
	got := s.waitTerminal(j.ID, 30*time.Second)
	if got.State != api.StateFailed || got.Reason != api.ReasonTimeLimit {
		t.Fatalf("job ended %s %q (%s), want failed time_limit", got.State, got.Reason, got.Message)
	}
	if ran := got.FinishedAt.Sub(*got.StartedAt); ran < time.Second || ran > 20*time.Second {
		t.Errorf("ran %v for a 1s limit", ran)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
