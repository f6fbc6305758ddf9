package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests run a control plane (`corral server`) and several `corral
// agent` processes on loopback, as a small cluster would.

const (
	joinToken      = "e2e-join-token"
	clusterTTL     = 2 * time.Second // --node-ttl of the test cluster
	clusterBackoff = time.Second     // --retry-backoff of the test cluster
)

// startCluster starts `corral server` with a short node TTL and retry
// backoff, so that node loss plays out within seconds.
func startCluster(t *testing.T, extra ...string) *server {
	t.Helper()
	args := append([]string{"server", "--node-ttl", clusterTTL.String(), "--heartbeat", "300ms", "--retry-backoff", clusterBackoff.String()}, extra...)
	return startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_JOIN_TOKEN=" + joinToken}, args...)
}

// agentProc is one `corral agent` process; start runs it (again) with the
// same node name and data directory.
type agentProc struct {
	t       *testing.T
	s       *server
	name    string
	dataDir string
	args    []string
	*proc
}

// startAgent starts an agent for node name with gpus simulated GPUs and
// waits until the server lists the node as up.
func startAgent(t *testing.T, s *server, name string, gpus int, extra ...string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, s: s, name: name, dataDir: t.TempDir()}
	a.args = append([]string{"agent", "--server", s.URL, "--node-name", name, "--data-dir", a.dataDir,
		"--simulate-gpus", strconv.Itoa(gpus), "--interval", "300ms"}, extra...)
	a.start()
	t.Cleanup(a.stop)
	return a
}

func (a *agentProc) start() {
	a.t.Helper()
	a.launch()
	a.s.waitNode(a.name, "up", 20*time.Second)
}

// launch starts the agent process without waiting for its node.
func (a *agentProc) launch() {
	a.t.Helper()
	a.proc = &proc{out: &lockedBuffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(corralBin, a.args...)
	a.cmd.Env = cleanEnv("CORRAL_JOIN_TOKEN=" + joinToken)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		a.t.Fatalf("start agent %s: %v", a.name, err)
	}
	p := a.proc
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
}

// kill9 kills the agent process alone: its jobs run on under their shims.
func (a *agentProc) kill9() {
	a.t.Helper()
	syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		a.t.Fatalf("agent %s did not die within 10s of SIGKILL", a.name)
	}
}

// stop ends the agent and, on a failed test, shows its output.
func (a *agentProc) stop() {
	if a.proc == nil {
		return
	}
	select {
	case <-a.done:
	default:
		syscall.Kill(a.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL)
			<-a.done
		}
	}
	if a.t.Failed() {
		a.t.Logf("output of agent %s:\n%s", a.name, truncate(a.out.String(), 20000))
	}
}

// waitNode polls until the node is listed in the given state.
func (s *server) waitNode(name, state string, timeout time.Duration) api.Node {
	s.t.Helper()
	var n api.Node
	waitFor(s.t, timeout, func() string { return fmt.Sprintf("node %s to be %s (is %q)", name, state, n.State) }, func() bool {
		for _, x := range s.cluster().Nodes {
			if x.NodeID == name {
				n = x
				return x.State == state
			}
		}
		return false
	})
	return n
}

// rankLog reads the output of one rank of a job's latest attempt.
func (s *server) rankLog(id string, rank int) string {
	s.t.Helper()
	r := s.do("GET", fmt.Sprintf("/jobs/%s/logs?rank=%d", id, rank), nil, nil)
	if r.Status != http.StatusOK {
		s.t.Fatalf("logs of %s rank %d: %s", id, rank, r)
	}
	return string(r.Body)
}

// A 2-node gang starts on both nodes with the rank variables torchrun
// needs, each rank on its own node's GPUs, and each rank's output is read
// through the server. Live telemetry follows the job.
func TestAgentsRunAGangAcrossNodes(t *testing.T) {
	s := startCluster(t)
	startAgent(t, s, "n1", 4)
	startAgent(t, s, "n2", 4, "--label", "rack=r2")

	// A node is up once it registers; its first telemetry comes with its
	// first sync, a moment later.
	var c api.ClusterStatus
	waitFor(t, 20*time.Second, func() string { return "telemetry from every GPU" }, func() bool {
		c = s.cluster()
		for _, n := range c.Nodes {
			for _, g := range n.GPUs {
				if g.Temperature == nil {
					return false
				}
			}
		}
		return len(c.Nodes) == 2
	})
	if c.TotalGPUs != 8 || len(c.Nodes) != 2 {
		t.Fatalf("cluster: %d GPUs on %d nodes; want 8 on 2", c.TotalGPUs, len(c.Nodes))
	}
	for _, n := range c.Nodes {
		if !n.Simulated || n.GPUCount != 4 || n.LastSeen == nil {
			t.Errorf("node %s: simulated %v, %d GPUs, last seen %v; want simulated, 4, a time", n.NodeID, n.Simulated, n.GPUCount, n.LastSeen)
		}
		for _, g := range n.GPUs {
			if g.UUID == "" || g.Temperature == nil || !g.Simulated {
				t.Errorf("node %s GPU %d: uuid %q, temperature %v, simulated %v", n.NodeID, g.ID, g.UUID, g.Temperature, g.Simulated)
			}
		}
		if n.NodeID == "n2" && n.Labels["rack"] != "r2" {
			t.Errorf("node n2 labels %v; want rack=r2", n.Labels)
		}
	}

	dir := t.TempDir()
	cmd := `echo "rank=$CORRAL_NODE_RANK of=$CORRAL_NUM_NODES master=$CORRAL_MASTER_ADDR:$CORRAL_MASTER_PORT` +
		` node=$CORRAL_NODE_ID cuda=$CUDA_VISIBLE_DEVICES torch=$MASTER_ADDR:$MASTER_PORT:$NODE_RANK"; ` + holdCmd(dir, "gang")
	j := s.submit(map[string]any{"command": cmd, "gpu_count": 4, "nodes": 2, "name": "gang"})
	j = s.waitState(j.ID, api.StateRunning, 20*time.Second)
	byNode := map[string][]int{}
	for _, a := range j.Allocation {
		byNode[a.NodeID] = append(byNode[a.NodeID], a.GPUID)
	}
	if len(byNode["n1"]) != 4 || len(byNode["n2"]) != 4 {
		t.Fatalf("gang allocation %v; want 4 GPUs on each of n1 and n2", byNode)
	}

	// The simulated telemetry shows the gang's GPUs at work.
	waitFor(t, 10*time.Second, func() string { return "the gang's GPUs to read busy" }, func() bool {
		busy := 0
		for _, n := range s.cluster().Nodes {
			for _, g := range n.GPUs {
				if g.Holder() == j.ID && g.Utilization > 50 && g.MemoryUsed > 0 {
					busy++
				}
			}
		}
		return busy == 8
	})

	release(t, dir, "gang")
	j = s.waitState(j.ID, api.StateCompleted, 20*time.Second)

	line := regexp.MustCompile(`rank=(\d+) of=(\d+) master=([^ ]*):(\d+) node=(\S+) cuda=(\S+) torch=(\S+)`)
	var masters []string
	for rank := range 2 {
		out := s.rankLog(j.ID, rank)
		m := line.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("rank %d output %q has no rank line", rank, out)
		}
		if m[1] != strconv.Itoa(rank) || m[2] != "2" {
			t.Errorf("rank %d says rank=%s of=%s; want %d of 2", rank, m[1], m[2], rank)
		}
		if port, _ := strconv.Atoi(m[4]); m[3] == "" || port <= 0 {
			t.Errorf("rank %d: master %s:%s; want an address and a port", rank, m[3], m[4])
		}
		masters = append(masters, m[3]+":"+m[4])
		if want := m[3] + ":" + m[4] + ":" + m[1]; m[7] != want {
			t.Errorf("rank %d: MASTER_ADDR:MASTER_PORT:NODE_RANK = %s; want %s", rank, m[7], want)
		}
		gpus, err := parseGPUList(m[6])
		if err != nil {
			t.Fatalf("rank %d: CUDA_VISIBLE_DEVICES %q: %v", rank, m[6], err)
		}
		slices.Sort(gpus)
		want := slices.Clone(byNode[m[5]])
		slices.Sort(want)
		if !slices.Equal(gpus, want) {
			t.Errorf("rank %d on %s sees GPUs %v; its allocation there is %v", rank, m[5], gpus, want)
		}
	}
	if masters[0] != masters[1] {
		t.Errorf("ranks disagree on the master: %v", masters)
	}
	s.waitAllFree(10 * time.Second)
}

// waitAllFree polls until no GPU of the cluster is allocated.
func (s *server) waitAllFree(timeout time.Duration) {
	s.t.Helper()
	var c api.ClusterStatus
	waitFor(s.t, timeout, func() string { return fmt.Sprintf("every GPU free (allocated %d)", c.AllocatedGPUs) }, func() bool {
		c = s.cluster()
		return c.AllocatedGPUs == 0
	})
}

// pidsCmd records the job shell's pid per attempt, then holds.
func pidsCmd(dir, hold string) string {
	d := shellQuote(dir)
	return fmt.Sprintf(`echo $$ > %s/pid-$CORRAL_ATTEMPT; echo "attempt $CORRAL_ATTEMPT on $CORRAL_NODE_ID"; `, d) + holdCmd(dir, hold)
}

// readPID reads the pid a pidsCmd job recorded for an attempt (0: none).
// waitAttemptPID waits for the attempt to record its pid in dir and
// returns it.
func waitAttemptPID(t *testing.T, dir string, attempt int) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, func() string { return fmt.Sprintf("attempt %d to record its pid", attempt) }, func() bool {
		pid = readAttemptPID(dir, attempt)
		return pid > 0
	})
	return pid
}

func readAttemptPID(dir string, attempt int) int {
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("pid-%d", attempt)))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// kill -9 of an agent: its node goes down after the TTL, its job with a
// retry left is requeued and, after the backoff, runs on the other node;
// its job without one fails with node_lost. The old attempt's process
// outlives its agent only until the TTL (its shim fences it), so the job
// never runs twice at once. The agent then comes back and its node is up.
func TestAgentKilledJobsFencedAndRequeued(t *testing.T) {
	s := startCluster(t)
	a1 := startAgent(t, s, "n1", 2)
	dir, dirB := t.TempDir(), t.TempDir()
	retried := s.submit(map[string]any{"command": pidsCmd(dir, "all"), "gpu_count": 1, "max_retries": 1, "name": "retried"})
	once := s.submit(map[string]any{"command": pidsCmd(dirB, "all"), "gpu_count": 1, "max_retries": 0, "name": "once"})
	s.waitState(once.ID, api.StateRunning, 20*time.Second)
	s.waitState(retried.ID, api.StateRunning, 20*time.Second)
	// n2 joins once both run on n1.
	startAgent(t, s, "n2", 2)

	var oldPID, oncePID int
	waitFor(t, 10*time.Second, func() string { return "the first attempts to record their pids" }, func() bool {
		oldPID, oncePID = readAttemptPID(dir, 0), readAttemptPID(dirB, 0)
		return oldPID > 0 && oncePID > 0
	})

	killedAt := time.Now()
	a1.kill9()
	s.waitNode("n1", "down", clusterTTL+5*time.Second)

	o := s.waitState(once.ID, api.StateFailed, 10*time.Second)
	if o.Reason != api.ReasonNodeLost {
		t.Errorf("job without retries ended %s with reason %q; want node_lost", o.State, o.Reason)
	}
	r := s.waitJob(retried.ID, clusterTTL+clusterBackoff+15*time.Second, "to run again on n2", func(j api.Job) bool {
		return j.State == api.StateRunning && j.RetryCount == 1
	})
	if !processGone(oldPID) || !processGone(oncePID) {
		t.Errorf("the retry runs while the first attempt (pid %d, gone %v) or the failed job (pid %d, gone %v) still runs on n1",
			oldPID, processGone(oldPID), oncePID, processGone(oncePID))
	}
	if r.Allocation[0].NodeID != "n2" {
		t.Errorf("retry runs on %s; want n2 (n1 is down)", r.Allocation[0].NodeID)
	}
	var requeued, restarted time.Time
	for _, e := range r.Events {
		if e.To == api.StateQueued && e.Reason == api.ReasonNodeLost {
			requeued = e.At
		}
		if e.To == api.StateRunning {
			restarted = e.At
		}
	}
	if requeued.IsZero() {
		t.Fatalf("no requeue event with reason node_lost: %+v", r.Events)
	}
	if lag := requeued.Sub(killedAt); lag > clusterTTL+3*time.Second {
		t.Errorf("requeued %v after the agent died; want within the TTL (%v) and a tick", lag, clusterTTL)
	}
	if gap := restarted.Sub(requeued); gap < clusterBackoff {
		t.Errorf("restarted %v after the requeue; want no sooner than the backoff (%v)", gap, clusterBackoff)
	}

	// The agent comes back; its node takes work again.
	a1.start()
	release(t, dir, "all")
	r = s.waitState(retried.ID, api.StateCompleted, 20*time.Second)
	if r.RetryCount != 1 {
		t.Errorf("retry_count %d; want 1", r.RetryCount)
	}
	s.waitAllFree(10 * time.Second)
	if c := s.cluster(); c.TotalGPUs != 4 || c.AvailableGPUs != 4 {
		t.Errorf("after n1 came back: total %d, available %d; want 4 and 4", c.TotalGPUs, c.AvailableGPUs)
	}
}

// A partition leaves the agent alive but cut off: the server moves its job
// on after the TTL. When the partition heals, the agent learns that the
// server no longer wants the old attempt and kills it; the node is up again.
func TestAgentPartitionStaleAttemptStopped(t *testing.T) {
	s := startCluster(t)
	px := newProxy(t, strings.TrimPrefix(s.URL, "http://"))
	a1 := &agentProc{t: t, s: s, name: "n1", dataDir: t.TempDir()}
	a1.args = []string{"agent", "--server", "http://" + px.addr(), "--node-name", "n1", "--data-dir", a1.dataDir,
		"--simulate-gpus", "2", "--interval", "300ms"}
	a1.start()
	t.Cleanup(a1.stop)
	dir := t.TempDir()
	j := s.submit(map[string]any{"command": pidsCmd(dir, "all"), "gpu_count": 1, "max_retries": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)
	oldPID := waitAttemptPID(t, dir, 0)
	startAgent(t, s, "n2", 2)

	px.cut()
	s.waitNode("n1", "down", clusterTTL+5*time.Second)
	s.waitJob(j.ID, clusterBackoff+15*time.Second, "to run again on n2", func(j api.Job) bool {
		return j.State == api.StateRunning && j.RetryCount == 1
	})
	if processGone(oldPID) {
		t.Fatalf("the cut-off agent's job (pid %d) died; its agent lives and only the server can tell it to stop", oldPID)
	}
	px.heal()
	waitFor(t, 15*time.Second, func() string { return fmt.Sprintf("the stale attempt (pid %d) to be stopped", oldPID) }, func() bool {
		return processGone(oldPID)
	})
	s.waitNode("n1", "up", 10*time.Second)
	release(t, dir, "all")
	if got := s.waitState(j.ID, api.StateCompleted, 20*time.Second); got.RetryCount != 1 {
		t.Errorf("retry_count %d; want 1", got.RetryCount)
	}
	s.waitAllFree(10 * time.Second)
}

// proxy is a TCP relay whose traffic can be cut and restored: a network
// partition between one agent and the server.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &proxy{t: t, ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() { io.Copy(c, u); c.Close() }()
	}
}

// cut drops every connection and refuses new ones until heal.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// An agent restart within the TTL does not restart its jobs: the new agent
// adopts the running process and its log, and reports its real end.
func TestAgentRestartAdoptsRunningJob(t *testing.T) {
	s := startCluster(t)
	a := startAgent(t, s, "n1", 2)
	dir := t.TempDir()
	d := shellQuote(dir)
	cmd := fmt.Sprintf(`echo $$ > %s/pid-$CORRAL_ATTEMPT; echo before; %s; echo after; exit 3`, d, holdCmd(dir, "all"))
	j := s.submit(map[string]any{"command": cmd, "gpu_count": 1, "max_retries": 2})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)
	pid := waitAttemptPID(t, dir, 0)

	a.kill9()
	a.start()
	waitFor(t, 10*time.Second, func() string { return "the new agent to adopt the job" }, func() bool {
		return strings.Contains(a.out.String(), "task adopted")
	})
	if processGone(pid) {
		t.Fatalf("the job's process %d died with its agent", pid)
	}
	release(t, dir, "all")
	got := s.waitTerminal(j.ID, 20*time.Second)
	if got.State != api.StateFailed || got.ExitCode == nil || *got.ExitCode != 3 || got.RetryCount != 0 {
		t.Errorf("job ended %s, exit %v, retry_count %d; want failed with its own exit code 3 and no retry", got.State, got.ExitCode, got.RetryCount)
	}
	if readAttemptPID(dir, 1) != 0 {
		t.Errorf("a second attempt ran: the job was restarted, not adopted")
	}
	if out := s.logs(j.ID); !strings.Contains(out, "before") || !strings.Contains(out, "after") {
		t.Errorf("log %q; want the output from before and after the agent restart", out)
	}
}

// Draining a node lets its running job finish and starts nothing new there.
func TestAgentDrain(t *testing.T) {
	s := startCluster(t)
	startAgent(t, s, "n1", 2)
	startAgent(t, s, "n2", 2)
	dir := t.TempDir()
	first := s.submit(map[string]any{"command": holdCmd(dir, "first"), "gpu_count": 1})
	first = s.waitState(first.ID, api.StateRunning, 20*time.Second)
	node := first.Allocation[0].NodeID
	other := map[string]string{"n1": "n2", "n2": "n1"}[node]

	stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "nodes", "drain", node)
	if code != 0 {
		t.Fatalf("corral nodes drain %s: exit %d\n%s%s", node, code, stdout, stderr)
	}
	s.waitNode(node, "draining", 5*time.Second)
	// New work goes to the other node only; a 2-GPU job fits nowhere else.
	next := s.submit(map[string]any{"command": holdCmd(dir, "next"), "gpu_count": 2})
	next = s.waitState(next.ID, api.StateRunning, 20*time.Second)
	if next.Allocation[0].NodeID != other {
		t.Errorf("a new job started on %s while it drains", next.Allocation[0].NodeID)
	}
	blocked := s.submit(map[string]any{"command": "true", "gpu_count": 1})
	s.waitJob(blocked.ID, 10*time.Second, "to say why it waits", func(j api.Job) bool { return j.PendingMessage != "" })
	if j := s.job(blocked.ID); j.State != api.StateQueued {
		t.Errorf("a job started (%s) with one node draining and the other full", j.State)
	}
	if j := s.job(first.ID); j.State != api.StateRunning {
		t.Errorf("the draining node's job is %s; drain lets it run", j.State)
	}
	release(t, dir, "first")
	s.waitState(first.ID, api.StateCompleted, 20*time.Second)
	s.waitNode(node, "drained", 10*time.Second)
	if j := s.job(blocked.ID); j.State != api.StateQueued {
		t.Errorf("a job started (%s) on a drained node", j.State)
	}
	if _, _, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "nodes", "uncordon", node); code != 0 {
		t.Fatalf("corral nodes uncordon: exit %d", code)
	}
	s.waitState(blocked.ID, api.StateCompleted, 20*time.Second)
	release(t, dir, "next")
	s.waitState(next.ID, api.StateCompleted, 20*time.Second)
}
