package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestMineByDefault: two users, each with their own token, see only their
// own jobs in corral queue and corral jobs, -A shows both users' jobs (as
// an admin's corral queue does), and
// ana's corral cancel --name eval cancels her evals and leaves bo's.
func TestMineByDefault(t *testing.T) {
	s := startServer(t)
	env := func(tok string) []string { return []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + tok} }
	ana, bo := env(userToken(t, s, "ana")), env(userToken(t, s, "bo"))
	ids := map[string][]string{}
	for _, u := range []struct {
		name string
		env  []string
		n    int
	}{{"ana", ana, 2}, {"bo", bo, 1}} {
		for range u.n {
			out, errOut, code := runCLI(t, u.env, "-o", "json", "submit", "--gpus", "1", "--name", "eval", "--", "sleep 300")
			var j api.Job
			if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
				t.Fatalf("%s's submit: exit %d, %s %s", u.name, code, out, errOut)
			}
			ids[u.name] = append(ids[u.name], j.ID)
		}
	}
	owners := func(env []string, args ...string) map[string]int {
		t.Helper()
		if env == nil {
			env = []string{"CORRAL_SERVER=" + s.URL} // the admin token
		}
		out, errOut, code := runCLI(t, env, append([]string{"-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
		var v struct {
			Jobs    []api.Job       `json:"jobs"`
			Running []api.Job       `json:"running_jobs"`
			Queued  []api.QueuedJob `json:"queued_jobs"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		got := map[string]int{}
		for _, j := range append(v.Jobs, v.Running...) {
			got[j.User]++
		}
		for _, j := range v.Queued {
			got[j.User]++
		}
		return got
	}
	for _, tc := range []struct {
		who  string
		env  []string
		args []string
		ana  int
		bo   int
	}{
		{"admin", nil, []string{"queue"}, 2, 1}, // admins see everyone's, as with squeue
		{"admin", nil, []string{"jobs"}, 2, 1},
		{"ana", ana, []string{"queue"}, 2, 0},
		{"bo", bo, []string{"queue"}, 0, 1},
		{"ana", ana, []string{"queue", "-A"}, 2, 1},
		{"ana", ana, []string{"jobs"}, 2, 0},
		{"bo", bo, []string{"jobs", "--name", "eval"}, 0, 1},
		{"bo", bo, []string{"jobs", "--all-users"}, 2, 1},
	} {
		if got := owners(tc.env, tc.args...); got["ana"] != tc.ana || got["bo"] != tc.bo || len(got) > 2 {
			t.Errorf("%s: corral %v: owners %v, want ana %d, bo %d", tc.who, tc.args, got, tc.ana, tc.bo)
		}
	}
	out, errOut, code := runCLI(t, ana, "cancel", "--name", "eval")
	if code != 0 || strings.Contains(out+errOut, ids["bo"][0]) {
		t.Fatalf("ana's cancel --name eval: exit %d, %s %s", code, out, errOut)
	}
	for _, id := range ids["ana"] {
		s.waitJob(id, 30*time.Second, "ana's eval canceled", func(j api.Job) bool { return j.State == api.StateCanceled })
	}
	if j := s.job(ids["bo"][0]); j.State.Terminal() || j.CancelRequested {
		t.Errorf("bo's eval after ana's cancel: %s (cancel requested %v)", j.State, j.CancelRequested)
	}
}

// TestLogsTailLarge: corral logs --tail 5 of a job that printed 100,000
// lines prints the last 5, quickly.
func TestLogsTailLarge(t *testing.T) {
	s := startServer(t)
	j := s.submit(map[string]any{"command": "seq 1 100000", "gpu_count": 0})
	s.waitJob(j.ID, 60*time.Second, "the job completed", func(j api.Job) bool { return j.State == api.StateCompleted })
	start := time.Now()
	out, errOut, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "logs", j.ID, "--tail", "5")
	took := time.Since(start)
	if code != 0 || out != "99996\n99997\n99998\n99999\n100000\n" {
		t.Fatalf("logs --tail 5: exit %d, %q %s", code, out, errOut)
	}
	if took > 5*time.Second {
		t.Errorf("logs --tail 5 took %v", took)
	}
	t.Logf("corral logs --tail 5 of 100,000 lines (%d bytes): %v", len(s.logs(j.ID)), took)
}
