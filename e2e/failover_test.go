package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store/storetest"
)

// health is GET /healthz of a server on PostgreSQL.
type health struct {
	Status, Role, Leader string
}

func (s *server) health() health {
	s.t.Helper()
	var h health
	s.mustJSON("GET", "/healthz", nil, http.StatusOK, &h)
	return h
}

// waitLeader waits until s leads (it held back as a follower until the
// lease was free).
func (s *server) waitLeader(within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for s.health().Role != "leader" {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not lead within %s; output:\n%s", s.URL, within, s.out.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// TestFailoverFollowers: three servers on one PostgreSQL. The first leads;
// the others answer /healthz as followers naming it, serve job reads from
// the database, and send changes to it with a 307 (a client that follows
// it lands its submission on the leader). When the leader is killed (-9),
// a follower takes the lease and serves changes itself, and the other
// follower's redirects name the new leader.
func TestFailoverFollowers(t *testing.T) {
	dsn := storetest.Postgres(t) // skips without CORRAL_TEST_POSTGRES
	start := func(name string) *server {
		return startServing(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", name, "--store", dsn)
	}
	a := start("node-a")
	a.waitLeader(30 * time.Second)
	b, c := start("node-b"), start("node-c")
	for _, f := range []*server{b, c} {
		if h := f.health(); h.Role != "follower" || h.Leader != a.URL {
			t.Fatalf("%s healthz = %+v; want a follower naming %s", f.URL, h, a.URL)
		}
	}

	j := a.submit(map[string]any{"command": "sleep 600", "gpu_count": 1, "name": "on-a"})
	if got := b.job(j.ID); got.ID != j.ID || got.Name != "on-a" {
		t.Fatalf("GET /jobs/%s on a follower = %+v", j.ID, got)
	}
	var list api.JobList
	b.mustJSON("GET", "/jobs?name=on-a&limit=10", nil, http.StatusOK, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != j.ID {
		t.Fatalf("GET /jobs?name=on-a on a follower = %+v", list.Jobs)
	}
	// A read with no valid token is refused on a follower as on the leader.
	req, _ := http.NewRequest("GET", b.URL+"/jobs", nil)
	req.Header.Set("Authorization", "Bearer nonsense")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("follower read with a bad token: %v %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// A change sent to a follower: 307 to the leader, then (followed) done there.
	body, _ := json.Marshal(map[string]any{"command": "true", "gpu_count": 0, "name": "via-b"})
	noFollow := &http.Client{Transport: newWithToken(adminToken), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Post(b.URL+"/queue/submit", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != a.URL+"/queue/submit" {
		t.Fatalf("POST /queue/submit on a follower: %d Location %q; want 307 to %s/queue/submit", resp.StatusCode, resp.Header.Get("Location"), a.URL)
	}
	var via api.Job
	b.mustJSON("POST", "/queue/submit", map[string]any{"command": "true", "gpu_count": 0, "name": "via-b"}, http.StatusCreated, &via)
	if got := a.job(via.ID); got.Name != "via-b" {
		t.Fatalf("the submission sent through the follower is not on the leader: %+v", got)
	}

	// The CLI given every server, a follower first, lands on the leader.
	all := []string{"CORRAL_SERVER=" + b.URL + "," + a.URL + "," + c.URL}
	if out, stderr, code := runCLI(t, all, "submit", "--gpus", "0", "--name", "cli-before", "--", "true"); code != 0 {
		t.Fatalf("corral submit with CORRAL_SERVER=b,a,c: exit %d\n%s%s", code, out, stderr)
	}

	// The leader dies: a follower leads within the lease's TTL and more.
	a.kill9()
	// The same CLI rides the fail-over out: it waits while no server leads.
	out, stderr, code := runCLI(t, all, "submit", "--gpus", "0", "--name", "cli-after", "-o", "json", "--", "true")
	if code != 0 {
		t.Fatalf("corral submit during the fail-over: exit %d\n%s%s", code, out, stderr)
	}
	var cliJob api.Job
	if err := json.Unmarshal([]byte(out), &cliJob); err != nil || cliJob.ID == "" {
		t.Fatalf("corral submit -o json: %q %v", out, err)
	}
	deadline := time.Now().Add(45 * time.Second)
	var lead, other *server
	for lead == nil {
		for _, f := range []*server{b, c} {
			if f.health().Role == "leader" {
				lead = f
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no follower led within 45s of the leader's death;\nb:\n%s\nc:\n%s", b.out.String(), c.out.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	other = c
	if lead == c {
		other = b
	}
	after := lead.submit(map[string]any{"command": "true", "gpu_count": 0, "name": "after"})
	if got := lead.job(j.ID); got.ID != j.ID {
		t.Fatalf("job %s lost in the fail-over", j.ID)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, err := noFollow.Post(other.URL+"/queue/submit", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTemporaryRedirect && strings.HasPrefix(resp.Header.Get("Location"), lead.URL+"/") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other follower answers %d Location %q; want 307 to the new leader %s", resp.StatusCode, resp.Header.Get("Location"), lead.URL)
		}
		time.Sleep(50 * time.Millisecond) // poll interval: its cached lease row ages out
	}
	if got := lead.job(cliJob.ID); got.Name != "cli-after" {
		t.Fatalf("the CLI's submission during the fail-over is not on the new leader: %+v", got)
	}
	if got := other.job(after.ID); got.ID != after.ID {
		t.Fatalf("the other follower does not read job %s made by the new leader", after.ID)
	}
}

// TestBenchFailover runs the fail-over measurement briefly: two kills of
// the leader of three servers under a modest submission load; nothing
// acknowledged is lost or duplicated, no job attempt runs twice, no GPU is
// given to two jobs, and a follower leads after each kill.
func TestBenchFailover(t *testing.T) {
	dsn := storetest.Postgres(t)
	// Not t.TempDir: the agent's last jobs run on under their shims after
	// the bench stops it, and write their exit status a moment later.
	dir, err := os.MkdirTemp("", "bench-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for os.RemoveAll(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond) // poll interval: the last shims end
		}
	})
	out, stderr, code := runCLI(t, nil, "bench", "failover", "--store", dsn, "--kills", "2", "--rate", "50",
		"--concurrency", "8", "--pause", "2s", "--warmup", "2s", "--gpus", "2", "--dir", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("bench failover: exit %d\n%s\n%s", code, out, stderr)
	}
	var r struct {
		Kills []struct {
			NewLeaderS float64 `json:"new_leader_s"`
		}
		Acked       int `json:"acked"`
		Lost        int `json:"lost"`
		Duplicated  int `json:"duplicated"`
		RanTwice    int `json:"ran_twice"`
		GPUOverlaps int `json:"gpu_overlaps"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench failover -o json: %v\n%s", err, out)
	}
	if len(r.Kills) != 2 || r.Acked == 0 || r.Lost != 0 || r.Duplicated != 0 || r.RanTwice != 0 || r.GPUOverlaps != 0 {
		t.Fatalf("bench failover report: %+v", r)
	}
}

// TestFailoverShipsLogs: a standalone agent given both servers runs a job
// whose first output reached the leader; the leader dies (-9) and the
// follower leads. The new leader ends up with the job's whole log, the
// output from before the fail-over included: the agent ships it again
// from its start when the new leader answers that its copy is shorter
// (409 log_gap), instead of shipping only what is new into a gap.
func TestFailoverShipsLogs(t *testing.T) {
	dsn := storetest.Postgres(t) // skips without CORRAL_TEST_POSTGRES
	start := func() *server {
		return startServing(t, t.TempDir(), freePort(t), []string{"CORRAL_JOIN_TOKEN=" + joinToken}, "server", "--store", dsn,
			"--node-ttl", "10s", "--heartbeat", "300ms")
	}
	a := start()
	a.waitLeader(30 * time.Second)
	b := start()
	startAgent(t, a, "logs-node", 1, "--server", a.URL+","+b.URL)

	release := filepath.Join(t.TempDir(), "release")
	j := a.submit(map[string]any{"gpu_count": 1, "command": "echo before; while [ ! -e " + release + " ]; do sleep 0.05; done; echo after"})
	waitFor(t, 30*time.Second, func() string { return "the job's first output on the leader" }, func() bool {
		return strings.Contains(a.logs(j.ID), "before")
	})

	a.kill9()
	b.waitLeader(45 * time.Second)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitJob(j.ID, 60*time.Second, "completed on the new leader", func(j api.Job) bool { return j.State == api.StateCompleted })
	var got string
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("the whole log on the new leader; it holds %q", got) }, func() bool {
		got = b.logs(j.ID)
		return got == "before\nafter\n"
	})
}
