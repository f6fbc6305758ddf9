package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec/ray"
	"github.com/corral-sched/corral/internal/exec/ray/raytest"
)

// These tests drive `corral server --executor ...ray` against the Ray head
// emulator of internal/exec/ray/raytest, started in the test process: Ray
// itself cannot be installed here. The emulator runs the jobs' entrypoints
// as real processes on this machine.

const rayToken = "e2e-ray-token-0123456789abcdef0123"

// startRayServer starts `corral server` with the given --executor,
// pointed at the emulated head c, with short polls and breaker timings.
func startRayServer(t *testing.T, c *raytest.Cluster, executors string, extra ...string) *server {
	t.Helper()
	return startRayServerAt(t, c, t.TempDir(), freePort(t), executors, extra...)
}

// startRayServerAt is startRayServer on a given data directory and port.
func startRayServerAt(t *testing.T, c *raytest.Cluster, dataDir string, port int, executors string, extra ...string) *server {
	t.Helper()
	args := append([]string{"server", "--executor", executors, "--ray-address", c.URL, "--ray-poll", "100ms",
		"--ray-breaker-failures", "2", "--ray-breaker-reset", "300ms", "--ray-breaker-max-reset", "600ms",
		"--node-ttl", clusterTTL.String(), "--heartbeat", "300ms", "--retry-backoff", "200ms"}, extra...)
	return startControl(t, dataDir, port, []string{"CORRAL_JOIN_TOKEN=" + joinToken, "RAY_AUTH_TOKEN=" + rayToken}, args...)
}

// status reads GET /orchestrator/status.
func (s *server) status() api.OrchestratorStatus {
	s.t.Helper()
	var st api.OrchestratorStatus
	s.mustJSON("GET", "/orchestrator/status", nil, http.StatusOK, &st)
	return st
}

// rayBreaker is the Ray executor's breaker state in the status.
func (s *server) rayBreaker() string {
	for _, e := range s.status().Executors {
		if e.Name == "ray" {
			return e.Breaker
		}
	}
	return "(no ray executor listed)"
}

func TestRayMixedClusterRunsEachPoolOnItsNodes(t *testing.T) {
	c := raytest.New(raytest.Options{Token: rayToken, Nodes: []raytest.Node{{IP: "10.0.0.1", GPUs: 2, Model: "A100", Head: true}}})
	t.Cleanup(c.Close)
	s := startRayServer(t, c, "agents,ray")
	startAgent(t, s, "box", 2)

	rn := s.waitNode("ray-10.0.0.1", "up", 10*time.Second)
	if rn.Pool != "ray" || rn.GPUCount != 2 || rn.GPUType != "A100" {
		t.Fatalf("Ray node %+v", rn)
	}
	if bn := s.waitNode("box", "up", 10*time.Second); bn.Pool != "agents" {
		t.Fatalf("agent node %+v", bn)
	}

	onRay := s.submit(map[string]any{"command": `echo "hi from ray job $CORRAL_JOB_ID on gpus $CUDA_VISIBLE_DEVICES"`, "gpu_count": 2, "pool": "ray"})
	onBox := s.submit(map[string]any{"command": "echo hi from the agent", "gpu_count": 1, "pool": "agents"})
	fails := s.submit(map[string]any{"command": "echo failing; exit 3", "gpu_count": 1, "pool": "ray"})

	j := s.waitState(onRay.ID, api.StateCompleted, 30*time.Second)
	if len(j.Allocation) != 2 || j.Allocation[0].NodeID != "ray-10.0.0.1" || j.Pool != "ray" {
		t.Fatalf("ray job placed %+v", j.Allocation)
	}
	if got := s.logs(onRay.ID); !strings.Contains(got, "hi from ray job "+onRay.ID+" on gpus 0,1") {
		t.Fatalf("ray job's log %q", got)
	}
	rj, ok := c.Job(ray.SubmissionID(onRay.ID, 0))
	if !ok || rj.EntrypointResources["node:10.0.0.1"] != 0.001 || rj.EnvVars["RAY_JOB_STOP_WAIT_TIME_S"] != "2" {
		t.Fatalf("the head's record of the job: %+v (known %v)", rj, ok)
	}
	if j := s.waitState(onBox.ID, api.StateCompleted, 30*time.Second); j.Allocation[0].NodeID != "box" {
		t.Fatalf("agents job placed %+v", j.Allocation)
	}
	f := s.waitState(fails.ID, api.StateFailed, 30*time.Second)
	if f.ExitCode == nil || *f.ExitCode != 3 || !strings.Contains(s.logs(fails.ID), "failing") {
		t.Fatalf("failing ray job %+v", f)
	}

	// A canceled Ray job is stopped through the Jobs API.
	long := s.submit(map[string]any{"command": "echo started; sleep 60", "gpu_count": 1, "pool": "ray"})
	s.waitState(long.ID, api.StateRunning, 30*time.Second)
	s.mustJSON("DELETE", "/queue/"+long.ID, nil, http.StatusAccepted, nil)
	s.waitState(long.ID, api.StateCanceled, 30*time.Second)
	if c.Requests("POST /api/jobs/"+ray.SubmissionID(long.ID, 0)+"/stop") == 0 {
		t.Fatal("the cancel sent no stop to Ray")
	}
	if rj, _ := c.Job(ray.SubmissionID(long.ID, 0)); rj.Status != ray.StatusStopped {
		t.Fatalf("Ray's status of the canceled job: %s", rj.Status)
	}

	// The CLI: submit --pool, and show prints the pool.
	cli := []string{"CORRAL_SERVER=" + s.URL}
	out, stderr, code := runCLI(t, cli, "submit", "-o", "json", "--pool", "ray", "--gpus", "1", "--", "echo", "cli-on-ray")
	var viaCLI api.Job
	if code != 0 || json.Unmarshal([]byte(out), &viaCLI) != nil {
		t.Fatalf("corral submit --pool ray: exit %d, %s %s", code, out, stderr)
	}
	if j := s.waitState(viaCLI.ID, api.StateCompleted, 30*time.Second); j.Pool != "ray" || j.Allocation[0].NodeID != "ray-10.0.0.1" {
		t.Fatalf("CLI job %+v on %+v", j.Pool, j.Allocation)
	}
	if out, _, _ := runCLI(t, cli, "show", viaCLI.ID); !strings.Contains(out, "Pool") || !strings.Contains(out, "ray") {
		t.Fatalf("corral show: %s", out)
	}

	st := s.status()
	names := []string{}
	for _, e := range st.Executors {
		names = append(names, e.Name+":"+e.Breaker)
	}
	if got := strings.Join(names, ","); got != "ray:closed,agents:" {
		t.Fatalf("executors in the status: %s", got)
	}
	r := s.do("POST", "/queue/submit", map[string]any{"command": "true", "pool": "slurm"}, nil)
	if r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != "pool" {
		t.Fatalf("a pool the server lacks: %s", r)
	}
}

func TestRayUnreachableKeepsJobsQueuedAndHeadRestartLosesThem(t *testing.T) {
	c := raytest.New(raytest.Options{Token: rayToken, Nodes: []raytest.Node{{IP: "10.0.0.7", GPUs: 2}}})
	t.Cleanup(c.Close)
	s := startRayServer(t, c, "ray")
	s.waitNode("ray-10.0.0.7", "up", 10*time.Second)

	// Running while the head is cut off: the job keeps its state, the
	// node goes down, a new job stays queued.
	running := s.submit(map[string]any{"command": "echo first; sleep 60", "gpu_count": 1, "max_retries": 1})
	s.waitState(running.ID, api.StateRunning, 30*time.Second)
	c.SetUnreachable(true)
	waitFor(t, 10*time.Second, func() string { return "the breaker to open, is " + s.rayBreaker() }, func() bool { return s.rayBreaker() == "open" })
	s.waitNode("ray-10.0.0.7", "down", 10*time.Second)
	queued := s.submit(map[string]any{"command": "echo second", "gpu_count": 1})
	// Nothing may start or end while the executor probes the head in vain.
	probes := c.Requests("GET /api/v0/nodes")
	waitFor(t, 10*time.Second, func() string { return "two more probes of the head" }, func() bool { return c.Requests("GET /api/v0/nodes") >= probes+2 })
	if j := s.job(queued.ID); j.State != api.StateQueued {
		t.Fatalf("a job submitted while Ray is unreachable: %s, want queued", j.State)
	}
	if j := s.job(running.ID); j.State != api.StateRunning {
		t.Fatalf("the running job while Ray is unreachable: %s (%s)", j.State, j.Message)
	}

	// Reconnection: the breaker closes, the node comes back, the queued job runs.
	c.SetUnreachable(false)
	waitFor(t, 10*time.Second, func() string { return "the breaker to close, is " + s.rayBreaker() }, func() bool { return s.rayBreaker() == "closed" })
	s.waitNode("ray-10.0.0.7", "up", 10*time.Second)
	s.waitState(queued.ID, api.StateCompleted, 30*time.Second)

	// A head restart forgets its jobs: Corral's running job is lost and
	// retried as attempt 1, which Ray runs as a new submission.
	c.Restart()
	j := s.waitJob(running.ID, 30*time.Second, "to run again after the head restart", func(j api.Job) bool {
		return j.RetryCount == 1 && j.State == api.StateRunning
	})
	lost := false
	for _, e := range j.Events {
		if e.Reason == api.ReasonLost {
			lost = true
		}
	}
	if !lost {
		t.Fatalf("no lost event in %+v", eventStates(j))
	}
	waitFor(t, 10*time.Second, func() string { return fmt.Sprintf("Ray to run %s", ray.SubmissionID(running.ID, 1)) }, func() bool {
		rj, ok := c.Job(ray.SubmissionID(running.ID, 1))
		return ok && rj.Status == ray.StatusRunning
	})
}

// TestRayDashboardShowsTheBreaker opens the dashboard in headless Chromium:
// the header shows the Ray cluster connected, then unreachable when the
// head stops answering, then connected again, without a reload.
func TestRayDashboardShowsTheBreaker(t *testing.T) {
	ctx := browser(t) // dashboard_test.go; skips without chromium
	c := raytest.New(raytest.Options{Token: rayToken, Nodes: []raytest.Node{{IP: "10.0.0.9", GPUs: 1}}})
	t.Cleanup(c.Close)
	s := startRayServer(t, c, "ray")
	s.waitNode("ray-10.0.0.9", "up", 10*time.Second)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/cluster"),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-engine=ray][data-breaker=closed]`)),
		chromedp.WaitVisible(chromedp.CSS(`.node[data-node="ray-10.0.0.9"]`)),
	)
	if err != nil {
		t.Fatalf("dashboard with the Ray cluster connected: %v", err)
	}
	c.SetUnreachable(true)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-engine=ray][data-breaker=open]`))); err != nil {
		t.Fatalf("the open breaker never showed: %v", err)
	}
	if txt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-engine=ray]`))); err != nil || !strings.Contains(txt, "unreachable") {
		t.Fatalf("engine badge %q (%v)", txt, err)
	}
	c.SetUnreachable(false)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-engine=ray][data-breaker=closed]`))); err != nil {
		t.Fatalf("the closed breaker never came back: %v", err)
	}
}

// TestRayJobSurvivesAServerRestart restarts `corral server` while a Ray
// job runs: the new server adopts the submission (no second one), and the
// job's end and the rest of its log arrive.
func TestRayJobSurvivesAServerRestart(t *testing.T) {
	c := raytest.New(raytest.Options{Token: rayToken, Nodes: []raytest.Node{{IP: "10.0.0.5", GPUs: 1}}})
	t.Cleanup(c.Close)
	dir, port := t.TempDir(), freePort(t)
	s := startRayServerAt(t, c, dir, port, "ray")
	s.waitNode("ray-10.0.0.5", "up", 10*time.Second)
	gate := filepath.Join(t.TempDir(), "gate")
	j := s.submit(map[string]any{"command": "echo before; while [ ! -e " + shellQuote(gate) + " ]; do sleep 0.05; done; echo after", "gpu_count": 1})
	s.waitJob(j.ID, 30*time.Second, "to log before", func(api.Job) bool { return strings.Contains(s.logs(j.ID), "before") })
	s.stop()

	s = startRayServerAt(t, c, dir, port, "ray")
	if got := s.job(j.ID); got.State != api.StateRunning {
		t.Fatalf("after the restart the job is %s (%s), want still running", got.State, got.Message)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := s.waitState(j.ID, api.StateCompleted, 30*time.Second)
	if got.RetryCount != 0 || len(c.Submissions()) != 1 {
		t.Fatalf("attempt %d, %d submissions: the job ran again", got.RetryCount, len(c.Submissions()))
	}
	if l := s.logs(j.ID); strings.Count(l, "before") != 1 || !strings.Contains(l, "after") {
		t.Fatalf("log %q: want before once, then after", l)
	}
}

// TestRayGangRunsOneRayJobPerNode: a two-node job on the Ray pool is one
// Ray job per rank, each on its node with its rank, each rank's log read
// through the server.
func TestRayGangRunsOneRayJobPerNode(t *testing.T) {
	c := raytest.New(raytest.Options{Token: rayToken, Nodes: []raytest.Node{{IP: "10.0.1.1", GPUs: 1, Head: true}, {IP: "10.0.1.2", GPUs: 1}}})
	t.Cleanup(c.Close)
	s := startRayServer(t, c, "ray")
	s.waitNode("ray-10.0.1.2", "up", 10*time.Second)
	j := s.submit(map[string]any{"command": `echo "rank $CORRAL_NODE_RANK of $CORRAL_NUM_NODES on $CORRAL_NODE_ID, master $CORRAL_MASTER_ADDR"`, "gpu_count": 1, "nodes": 2})
	s.waitState(j.ID, api.StateCompleted, 30*time.Second)
	// Whichever node the core made rank 0, it is the master of both.
	var nodes [2]string
	for rank := range 2 {
		log := s.rankLog(j.ID, rank)
		var node, master string
		if _, err := fmt.Sscanf(strings.TrimSpace(log), fmt.Sprintf("rank %d of 2 on %%s master %%s", rank), &node, &master); err != nil {
			t.Fatalf("rank %d's log %q: %v", rank, log, err)
		}
		nodes[rank] = strings.TrimSuffix(node, ",")
		if "ray-"+master != nodes[0] {
			t.Errorf("rank %d's master %s, want rank 0's node %s", rank, master, nodes[0])
		}
	}
	if nodes[0] == nodes[1] {
		t.Fatalf("both ranks on %s", nodes[0])
	}
	ip1 := strings.TrimPrefix(nodes[1], "ray-")
	if r1, ok := c.Job(ray.RankSubmissionID(j.ID, 0, 1)); !ok || r1.EntrypointResources["node:"+ip1] != 0.001 {
		t.Fatalf("rank 1's Ray job %+v (known %v), want it pinned to %s", r1, ok, ip1)
	}
}
