package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests stall the server, restart it with a node down, and take a
// node from its agent: none of it may kill a running job, hand a job to a
// node that cannot run it, or leave an agent out of its node for ever.

// stallTTL is the --node-ttl of the stalled servers.
const stallTTL = 3 * time.Second

// pause stops the process for d (SIGSTOP), then lets it go on (SIGCONT).
// Its caller's test fails if the process cannot be signalled.
func pause(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	time.Sleep(d) // the stall itself: what is tested is what follows it
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %d: %v", pid, err)
	}
}

// A SIGSTOP of the server (of `corral up`, and of `corral server` with a
// remote agent) for more than twice --node-ttl kills no running job: the
// server says it stalled, its node stays up, and the job runs on and
// completes in its first attempt.
func TestServerStallKillsNoJob(t *testing.T) {
	cases := map[string]func(t *testing.T) *server{
		"corral up": func(t *testing.T) *server {
			return startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "e2e-node",
				"--node-ttl", stallTTL.String(), "--heartbeat", "500ms")
		},
		"corral server and an agent": func(t *testing.T) *server {
			s := startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_JOIN_TOKEN=" + joinToken}, "server",
				"--node-ttl", stallTTL.String(), "--heartbeat", "500ms", "--retry-backoff", "1s")
			a := &agentProc{t: t, s: s, name: "e2e-node", dataDir: t.TempDir()}
			a.args = []string{"agent", "--server", s.URL, "--node-name", a.name, "--data-dir", a.dataDir, "--simulate-gpus", "2", "--interval", "500ms"}
			a.start()
			t.Cleanup(a.stop)
			return s
		},
	}
	for name, start := range cases {
		t.Run(name, func(t *testing.T) {
			s := start(t)
			dir := t.TempDir()
			j := s.submit(map[string]any{"command": "echo started; " + holdCmd(dir, "job") + "; echo finished", "gpu_count": 1, "max_retries": 1})
			s.waitState(j.ID, api.StateRunning, 30*time.Second)

			pause(t, s.PID(), 2*stallTTL+time.Second)
			// A kill would show within the TTL of the server's running
			// time that follows: nothing to await but that time.
			time.Sleep(stallTTL + time.Second)
			if got := s.job(j.ID); got.State != api.StateRunning || got.RetryCount != 0 {
				t.Fatalf("the job after a stall of %s: %s (%s: %s), retry %d; want running in its first attempt",
					2*stallTTL+time.Second, got.State, got.Reason, got.Message, got.RetryCount)
			}
			s.waitNode("e2e-node", "up", 5*time.Second)
			if !strings.Contains(s.out.String(), "the server stalled") {
				t.Errorf("the server did not say it stalled")
			}
			release(t, dir, "job")
			got := s.waitState(j.ID, api.StateCompleted, 30*time.Second)
			if got.RetryCount != 0 || !strings.Contains(s.logs(j.ID), "finished") {
				t.Fatalf("job %s retry %d, log %q; want it completed in its first attempt", got.State, got.RetryCount, s.logs(j.ID))
			}
		})
	}
}

// A node that was down when the server stopped is still down after it
// starts again, and is given no job, until its agent registers again.
func TestNodeDownBeforeRestartGetsNoJob(t *testing.T) {
	env := []string{"CORRAL_JOIN_TOKEN=" + joinToken}
	args := []string{"server", "--node-ttl", clusterTTL.String(), "--heartbeat", "300ms", "--retry-backoff", clusterBackoff.String()}
	dataDir, port := t.TempDir(), freePort(t)
	s := startControl(t, dataDir, port, env, args...)
	startAgent(t, s, "n1", 1)
	n2 := startAgent(t, s, "n2", 1)
	n2.stop()
	s.waitNode("n2", "down", 20*time.Second)
	s.stop()

	s = startControl(t, dataDir, port, env, args...)
	for _, n := range s.cluster().Nodes {
		if n.NodeID == "n2" && n.State != "down" {
			t.Fatalf("n2 just after the restart: %s; want down", n.State)
		}
	}
	s.waitNode("n1", "up", 20*time.Second)
	dir := t.TempDir()
	first := s.submit(map[string]any{"command": holdCmd(dir, "a"), "gpu_count": 1})
	s.waitState(first.ID, api.StateRunning, 20*time.Second)
	second := s.submit(map[string]any{"command": "echo second", "gpu_count": 1})
	// Given to n2, the job would be placed at once and lost after the
	// TTL: nothing to await but that time.
	time.Sleep(clusterTTL + time.Second)
	if got := s.job(second.ID); got.State != api.StateQueued || len(got.Allocation) > 0 || got.RetryCount != 0 {
		t.Fatalf("the second job with n2 down: %s (%s) on %v, retry %d; want queued, never placed", got.State, got.Reason, got.Allocation, got.RetryCount)
	}
	if n := s.waitNode("n2", "down", time.Second); n.State != "down" {
		t.Fatalf("n2: %s; want down", n.State)
	}

	n2.start() // its agent comes back: the node is up, and runs the job
	got := s.waitState(second.ID, api.StateCompleted, 30*time.Second)
	if got.RetryCount != 0 || len(got.Allocation) == 0 || got.Allocation[0].NodeID != "n2" {
		t.Fatalf("the second job: retry %d on %v; want completed on n2 in its first attempt", got.RetryCount, got.Allocation)
	}
	release(t, dir, "a")
	s.waitState(first.ID, api.StateCompleted, 30*time.Second)
}

// agentID reads the agent id a `corral agent` keeps in its data directory.
func (a *agentProc) agentID() string {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.dataDir, "state", "agent-id"))
	if err != nil {
		a.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A replay of an agent's registration (its agent id, its time of then) is
// refused and changes nothing: the agent's job runs on and completes. A
// registration with its id and a newer time (a copy of the agent) takes
// the node's session; the agent, refused its next sync (403 wrong_node),
// registers again and has its node back: the copy's session is dead, and
// a job runs on the node.
func TestAgentReplayRefusedAndNodeTakenBack(t *testing.T) {
	s := startCluster(t)
	before := time.Now().UTC()
	a := startAgent(t, s, "n1", 1)
	dir := t.TempDir()
	j := s.submit(map[string]any{"command": holdCmd(dir, "job") + "; echo finished", "gpu_count": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)

	evil := &hostileAgent{s: s, node: "n1"}
	reg := map[string]any{"node_id": "n1", "agent_id": a.agentID(), "hostname": "evil", "gpus": []any{}, "tasks": []any{}, "now": before}
	wantError(t, evil.call("/agent/v1/register", reg), 409, "stale_registration", "now")
	time.Sleep(clusterTTL) // nothing to await: a replay taken would lose the job at once
	release(t, dir, "job")
	if got := s.waitState(j.ID, api.StateCompleted, 20*time.Second); got.RetryCount != 0 {
		t.Fatalf("the job after a refused replay: retry %d; want its first attempt", got.RetryCount)
	}

	reg["now"] = time.Now().UTC()
	r := evil.call("/agent/v1/register", reg)
	var cfg api.AgentConfig
	if r.Status != 200 || json.Unmarshal(r.Body, &cfg) != nil || cfg.Session == "" {
		t.Fatalf("a registration with the agent's id and a newer time: %s", r)
	}
	evil.session = cfg.Session
	waitFor(t, 20*time.Second, func() string { return "the agent to take its node back (the copy's session to die)" }, func() bool {
		return evil.call("/agent/v1/sync", map[string]any{"node_id": "n1", "tasks": []any{}}).Status == 403
	})
	if n := s.waitNode("n1", "up", 10*time.Second); n.Hostname == "evil" {
		t.Fatalf("n1 after the agent registered again: %+v", n)
	}
	j2 := s.submit(map[string]any{"command": "echo again", "gpu_count": 1})
	if got := s.waitTerminal(j2.ID, 30*time.Second); got.State != api.StateCompleted {
		t.Fatalf("a job on the node taken back: %s (%s)", got.State, got.Reason)
	}
	if !strings.Contains(a.out.String(), "registering again with a new session") {
		t.Errorf("the agent did not say why it registered again")
	}
}

// An agent whose node another agent took over while it was silent past
// the TTL says so, and takes its node back once the other has been silent
// for the TTL: it does not retry its dead session for ever.
func TestAgentTakesItsNodeBackAfterATakeOver(t *testing.T) {
	s := startCluster(t)
	a := startAgent(t, s, "n1", 1)
	evil := &hostileAgent{s: s, node: "n1"}

	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT)
	s.waitNode("n1", "down", 20*time.Second)
	evil.register("other-agent-0123456789", 1) // the take-over, after the TTL
	evil.sync(map[string]any{})
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The other agent goes silent (no more syncs of its); the node's own
	// agent takes the node back once it has been silent for the TTL.
	waitFor(t, 30*time.Second, func() string { return "the agent to register again" }, func() bool {
		return strings.Count(a.out.String(), "registered with the server") >= 2
	})
	s.waitNode("n1", "up", 10*time.Second)
	if r := evil.call("/agent/v1/sync", map[string]any{"node_id": "n1", "tasks": []any{}}); r.Status != 403 {
		t.Fatalf("the other agent's session once the node's own took it back: %s; want 403", r)
	}
	j := s.submit(map[string]any{"command": "echo back", "gpu_count": 1})
	if got := s.waitTerminal(j.ID, 30*time.Second); got.State != api.StateCompleted {
		t.Fatalf("a job on the node taken back: %s (%s)", got.State, got.Reason)
	}
	out := a.out.String()
	for _, want := range []string{"registering again with a new session", "another agent holds this node"} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent's log does not say %q", want)
		}
	}
}
