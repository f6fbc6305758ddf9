package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// clock is a settable time for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// startDynamic runs an orchestrator with no static nodes, a fake clock and
// a short node TTL.
func startDynamic(t *testing.T) (*harness, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	return startDynamicAt(t, filepath.Join(t.TempDir(), "corral.db"), clk), clk
}

// startDynamicAt is startDynamic on the store at path, with clock clk.
func startDynamicAt(t *testing.T, path string, clk *clock) *harness {
	t.Helper()
	return startConfig(t, path, Config{NodeTTL: 30 * time.Second, Tick: 10 * time.Millisecond, Now: clk.now})
}

func registration(node string, gpus int) api.AgentRegistration {
	r := api.AgentRegistration{NodeID: node, Hostname: node + ".lan", Labels: map[string]string{"rack": "r1"}}
	for i := range gpus {
		r.GPUs = append(r.GPUs, api.AgentGPU{Index: i, UUID: node + "-gpu", Model: "H100", MemoryMiB: 81920})
	}
	return r
}

func (h *harness) waitNodeState(node, want string) {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := h.o.Changed()
		for _, n := range h.o.Cluster(context.Background()).Nodes {
			if n.NodeID == node && n.State == want {
				return
			}
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond): // the loop's tick checks silence
		case <-deadline:
			h.t.Fatalf("node %s never became %s", node, want)
		}
	}
}

// TestNodeLossRequeuesWithBackoff: a node that stops reporting goes down
// after its TTL; its job is requeued with a backoff (retries left), its
// GPUs freed, and what is left of the attempt stopped; the node comes back
// when it reports again.
func TestNodeLossRequeuesWithBackoff(t *testing.T) {
	h, clk := startDynamic(t)
	ctx := context.Background()
	if err := h.o.RegisterNode(ctx, registration("n1", 4), "10.0.0.7"); err != nil {
		t.Fatal(err)
	}
	j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(2), MaxRetries: 1})
	task := h.nextStart()
	if task.NodeID != "n1" || len(task.Ranks) != 1 {
		t.Fatalf("task = %+v", task)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
	h.waitState(j.ID, api.StateRunning)

	clk.add(31 * time.Second)
	h.waitNodeState("n1", NodeDown)
	got := h.waitState(j.ID, api.StateQueued)
	if got.Reason != api.ReasonNodeLost || got.RetryCount != 1 || got.NotBefore == nil || !got.NotBefore.Equal(clk.now().Add(backoffBase)) {
		t.Fatalf("requeued job = %+v", got)
	}
	select {
	case stop := <-h.ex.stops:
		if stop.jobID != j.ID || stop.attempt != 0 || stop.grace != 0 {
			t.Fatalf("stop = %+v", stop)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lost attempt was not stopped")
	}
	if cs := h.o.Cluster(ctx); cs.AllocatedGPUs != 0 || cs.AvailableGPUs != 0 {
		t.Fatalf("down node's GPUs: %+v", cs)
	}
	h.waitCycle()
	if q, _ := h.o.Job(j.ID); q.PendingReason != "backoff" && q.PendingReason != "no_schedulable_node" {
		t.Fatalf("pending = %s: %s", q.PendingReason, q.PendingMessage)
	}

	h.o.NodeSeen("n1", []api.GPUReading{{Index: 0, Utilization: 50}}, nil, clk.now())
	h.waitNodeState("n1", NodeUp)
	clk.add(backoffBase)
	h.o.SetScheduling(ctx, true) // a cycle now, past the backoff
	if task := h.nextStart(); task.JobID != j.ID || task.Attempt != 1 {
		t.Fatalf("restart = %+v", task)
	}
}

// TestLostAttemptBacksOff: an attempt whose agent reports it gone (the
// agent came back without it) is requeued with the same doubling backoff
// as one on a lost node, and fails with "lost" once retries run out.
func TestLostAttemptBacksOff(t *testing.T) {
	h, clk := startDynamic(t)
	ctx := context.Background()
	if err := h.o.RegisterNode(ctx, registration("n1", 2), ""); err != nil {
		t.Fatal(err)
	}
	j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(1), MaxRetries: 2})
	for attempt, wait := range []time.Duration{backoffBase, 2 * backoffBase} {
		if task := h.nextStart(); task.JobID != j.ID || task.Attempt != attempt {
			t.Fatalf("start = %+v, want attempt %d", task, attempt)
		}
		h.o.Sink(exec.Update{JobID: j.ID, Attempt: attempt, Kind: exec.Exited, At: clk.now(),
			Lost: api.ReasonLost, Err: errors.New("the agent restarted without it")})
		got := h.waitState(j.ID, api.StateQueued)
		if got.Reason != api.ReasonLost || got.NotBefore == nil || !got.NotBefore.Equal(clk.now().Add(wait)) {
			t.Fatalf("attempt %d requeued as %+v, want not_before now+%s", attempt, got, wait)
		}
		h.noStart() // not before its backoff
		clk.add(wait)
		h.o.SetScheduling(ctx, true) // a cycle now, past the backoff
	}
	h.nextStart()
	h.o.Sink(exec.Update{JobID: j.ID, Attempt: 2, Kind: exec.Exited, At: clk.now(), Lost: api.ReasonLost})
	if got := h.waitState(j.ID, api.StateFailed); got.Reason != api.ReasonLost {
		t.Fatalf("out of retries: %+v", got)
	}
}

func TestCordonDrainAndLabels(t *testing.T) {
	h, _ := startDynamic(t)
	ctx := context.Background()
	h.o.RegisterNode(ctx, registration("a", 2), "")
	b := registration("b", 2)
	b.Labels = map[string]string{"ib": "yes"}
	h.o.RegisterNode(ctx, b, "")
	if a, err := h.o.SetNodeState(ctx, "a", "cordon"); err != nil || a.State != NodeCordoned {
		t.Fatalf("cordon: %+v %v", a, err)
	}
	first := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1)})
	if task := h.nextStart(); task.JobID != first.ID || task.NodeID != "b" {
		t.Fatalf("job went to %s despite the cordon", task.NodeID)
	}
	if a, _ := h.o.SetNodeState(ctx, "b", "drain"); a.State != NodeDraining {
		t.Fatalf("drain with a job running: %s", a.State)
	}
	h.o.Sink(exec.Update{JobID: first.ID, Kind: exec.Exited, At: time.Now()})
	h.waitState(first.ID, api.StateCompleted)
	h.waitNodeState("b", NodeDrained)
	h.o.SetNodeState(ctx, "a", "uncordon")
	h.o.SetNodeState(ctx, "b", "uncordon")
	ib := h.submit(api.SubmitRequest{Command: "y", GPUCount: gpus(2), NodeLabels: map[string]string{"ib": "yes"}})
	if task := h.nextStart(); task.JobID != ib.ID || task.NodeID != "b" {
		t.Fatalf("labelled job went to %s", task.NodeID)
	}
	if _, err := h.o.SetNodeState(ctx, "zz", "cordon"); err == nil {
		t.Fatal("unknown node cordoned")
	}
}

func TestIdleFlagAndForeignGPUs(t *testing.T) {
	h, clk := startDynamic(t)
	ctx := context.Background()
	h.o.RegisterNode(ctx, registration("n1", 2), "")
	// The window is shorter than the node TTL (30s): jumping the clock past
	// it must not also take the node down before its next report lands.
	if _, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{IdleWindow: api.RawValue(`"20s"`), IdleThreshold: ptr(10)}); err != nil {
		t.Fatal(err)
	}
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1)})
	task := h.nextStart()
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
	h.waitState(j.ID, api.StateRunning)
	g := task.GPUs[0]
	idle := []api.GPUReading{{Index: 0, Utilization: 3}, {Index: 1, Utilization: 3}}
	h.o.NodeSeen("n1", idle, nil, clk.now())
	clk.add(21 * time.Second)
	// The other GPU runs a process Corral did not start.
	h.o.NodeSeen("n1", idle, []api.ForeignProcess{{GPU: 1 - g, PID: 4242, User: "mallory"}}, clk.now())
	deadline := time.After(5 * time.Second)
	for {
		ch := h.o.Changed()
		if got, _ := h.o.Job(j.ID); got.Idle {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("job never flagged idle")
		}
	}
	cs := h.o.Cluster(ctx)
	if cs.ForeignGPUs != 1 || cs.AvailableGPUs != 0 || cs.Nodes[0].GPUs[1-g].Foreign[0].PID != 4242 {
		t.Fatalf("cluster = %+v", cs)
	}
	next := h.submit(api.SubmitRequest{Command: "y", GPUCount: gpus(1)})
	h.noStart()
	if got, _ := h.o.Job(next.ID); got.PendingReason != "insufficient_gpus" {
		t.Fatalf("job waiting for a foreign GPU: %s", got.PendingReason)
	}
}

// The agent that holds a node is kept with the node: after a server
// restart, before the holder is back, another agent (another agent id) is
// refused the node for the TTL from the start, while the holder may come
// back; once the TTL has passed without it, the other may take the node.
func TestNodeHolderKeptAcrossRestart(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "corral.db")
	ctx := context.Background()
	holder, other := registration("n1", 2), registration("n1", 2)
	holder.AgentID, other.AgentID = "holder-0123456789", "someone-else-0123456789"
	h := startDynamicAt(t, path, clk)
	if err := h.o.RegisterNode(ctx, holder, "10.0.0.7"); err != nil {
		t.Fatal(err)
	}
	clk.add(5 * time.Second)
	if err := h.o.RegisterNode(ctx, other, "10.6.6.6"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("another agent for a live node: %v; want 409", err)
	}
	h.stop()
	h.stop = nil

	clk.add(time.Minute) // the server was down a minute
	h = startDynamicAt(t, path, clk)
	clk.add(5 * time.Second)
	err := h.o.RegisterNode(ctx, other, "10.6.6.6")
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != "node_in_use" {
		t.Fatalf("another agent for the node just after a restart: %v; want 409 node_in_use", err)
	}
	if err := h.o.RegisterNode(ctx, holder, "10.0.0.7"); err != nil {
		t.Fatalf("the holder coming back after the restart: %v", err)
	}
	clk.add(31 * time.Second)
	if err := h.o.RegisterNode(ctx, other, "10.6.6.6"); err != nil {
		t.Fatalf("another agent once the holder was silent past the TTL: %v", err)
	}
}

// TestNodeGraceAfterTakeOver: a server that starts leading on a store where
// a node was last heard from long ago (the old leader died, and the take-
// over took longer than the node TTL) gives the node a full TTL from its
// start to report: the node is up and its job runs until then; a node that
// stays silent is declared down, and its job requeued, once that TTL has
// passed.
func TestNodeGraceAfterTakeOver(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "corral.db")
	ctx := context.Background()
	h := startDynamicAt(t, path, clk)
	for _, n := range []string{"n1", "n2"} {
		if err := h.o.RegisterNode(ctx, registration(n, 1), "10.0.0.7"); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for range 2 {
		j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(1), MaxRetries: 1})
		h.nextStart()
		h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
		h.waitState(j.ID, api.StateRunning)
		ids = append(ids, j.ID)
	}
	h.stop()
	h.stop = nil

	clk.add(2 * time.Minute) // the old leader is gone; four TTLs pass before another leads
	h = startConfig(t, path, Config{NodeTTL: 30 * time.Second, Tick: 10 * time.Millisecond, Now: clk.now, Executor: &adoptingExec{}})
	clk.add(29 * time.Second)
	h.waitTicks()
	for _, n := range h.o.Cluster(ctx).Nodes {
		if n.State == "down" {
			t.Fatalf("node %s is down %s into the new leader's term (TTL 30s)", n.NodeID, 29*time.Second)
		}
	}
	for _, id := range ids {
		if j, _ := h.o.Job(id); j.State != api.StateRunning {
			t.Fatalf("job %s is %s within the grace; want running", id, j.State)
		}
	}
	h.o.NodeSeen("n1", nil, nil, clk.now()) // n1 reports to the new leader; n2 never does
	clk.add(2 * time.Second)
	h.waitNodeState("n2", "down")
	h.waitNodeState("n1", "up")
}
