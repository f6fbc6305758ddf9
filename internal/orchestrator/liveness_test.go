package orchestrator

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// stallClock is the fake time of a server that may stall: wall is what
// Config.Now reads, run what Config.Clock reads (the server's own running
// clock). Time that passes while the server runs moves the wall clock
// only: the loop's real ticks see no gap in run. A stall moves both, under
// one lock, as a stopped process finds both moved when it wakes.
type stallClock struct {
	mu   sync.Mutex
	wall time.Time
	run  time.Time
}

func newStallClock() *stallClock {
	t := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	return &stallClock{wall: t, run: t}
}

func (c *stallClock) now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }
func (c *stallClock) clock() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.run }

// pass lets d go by while the server runs and attends.
func (c *stallClock) pass(d time.Duration) { c.mu.Lock(); c.wall = c.wall.Add(d); c.mu.Unlock() }

// stall stops the server for d (SIGSTOP, a suspend, a store that holds a
// commit).
func (c *stallClock) stall(d time.Duration) {
	c.mu.Lock()
	c.wall, c.run = c.wall.Add(d), c.run.Add(d)
	c.mu.Unlock()
}

const livenessTTL = 30 * time.Second

func startStallable(t *testing.T, path string, clk *stallClock, ex Config) *harness {
	t.Helper()
	ex.NodeTTL, ex.Tick, ex.Now, ex.Clock = livenessTTL, 10*time.Millisecond, clk.now, clk.clock
	return startConfig(t, path, ex)
}

// runOn registers the nodes (one GPU each) and runs a job on each; it
// returns the job ids by node.
func runOn(h *harness, clk *stallClock, nodes ...string) map[string]string {
	h.t.Helper()
	ctx := context.Background()
	for _, n := range nodes {
		if err := h.o.RegisterNode(ctx, registration(n, 1), "10.0.0.7"); err != nil {
			h.t.Fatal(err)
		}
	}
	jobs := map[string]string{}
	for range nodes {
		j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(1), MaxRetries: 1})
		task := h.nextStart()
		h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
		h.waitState(j.ID, api.StateRunning)
		jobs[task.NodeID] = j.ID
	}
	return jobs
}

// A node is lost only after --node-ttl of the server's own attention: a
// stall of the server (between two ticks) does not count against any
// node, while a node really silent past the TTL is still lost and the
// others are fine.
func TestLivenessOnTheServersOwnTime(t *testing.T) {
	cases := map[string]struct {
		steps    func(h *harness, clk *stallClock)
		wantDown map[string]bool
	}{
		"a stall of twice the TTL kills nothing": {
			steps: func(h *harness, clk *stallClock) {
				clk.stall(2 * livenessTTL)
				h.waitTicks()
				clk.pass(livenessTTL - time.Second) // the stall's grace, nearly spent
				h.waitTicks()
			},
			wantDown: map[string]bool{},
		},
		"a stall then a silence past the TTL loses the silent node": {
			steps: func(h *harness, clk *stallClock) {
				clk.stall(2 * livenessTTL)
				h.waitTicks()
				clk.pass(livenessTTL / 2)
				h.o.NodeSeen("n1", nil, nil, clk.now())
				clk.pass(livenessTTL/2 + time.Second)
				h.waitTicks()
			},
			wantDown: map[string]bool{"n2": true},
		},
		"a node silent past the TTL is lost, the other is fine": {
			steps: func(h *harness, clk *stallClock) {
				clk.pass(livenessTTL / 2)
				h.o.NodeSeen("n1", nil, nil, clk.now())
				clk.pass(livenessTTL/2 + time.Second)
				h.waitTicks()
			},
			wantDown: map[string]bool{"n2": true},
		},
		"reports queued behind a held lock count": {
			steps: func(h *harness, clk *stallClock) {
				h.o.mu.RLock() // a long read (or a store that holds a commit): the loop waits
				clk.pass(livenessTTL + time.Second)
				h.o.NodeSeen("n1", nil, nil, clk.now())
				h.o.NodeSeen("n2", nil, nil, clk.now())
				h.o.mu.RUnlock()
				h.waitTicks()
			},
			wantDown: map[string]bool{},
		},
		"stalls do not hide a silence between them": {
			steps: func(h *harness, clk *stallClock) {
				for range 3 {
					clk.stall(livenessTTL)
					h.waitTicks()
					clk.pass(livenessTTL / 2)
					h.o.NodeSeen("n1", nil, nil, clk.now())
					h.waitTicks()
				}
			},
			wantDown: map[string]bool{"n2": true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := newStallClock()
			h := startStallable(t, filepath.Join(t.TempDir(), "corral.db"), clk, Config{})
			jobs := runOn(h, clk, "n1", "n2")
			tc.steps(h, clk)
			for node, id := range jobs {
				if tc.wantDown[node] {
					h.waitNodeState(node, NodeDown)
					if j := h.waitState(id, api.StateQueued); j.Reason != api.ReasonNodeLost {
						t.Fatalf("job %s on lost node %s: %s (%s); want queued, node_lost", id, node, j.State, j.Reason)
					}
					continue
				}
				h.waitNodeState(node, NodeUp)
				if j, _ := h.o.Job(id); j.State != api.StateRunning || j.RetryCount != 0 {
					t.Fatalf("job %s on %s: %s (%s) retry %d; want running in its first attempt", id, node, j.State, j.Reason, j.RetryCount)
				}
			}
		})
	}
}

// A node that was down before a restart stays down after it, and is given
// no job, until its agent registers again; a node that was up gets a TTL
// from the start.
func TestNodeDownBeforeRestartStaysDown(t *testing.T) {
	clk := newStallClock()
	path := filepath.Join(t.TempDir(), "corral.db")
	ctx := context.Background()
	h := startStallable(t, path, clk, Config{})
	for _, n := range []string{"n1", "n2"} {
		if err := h.o.RegisterNode(ctx, registration(n, 1), "10.0.0.7"); err != nil {
			t.Fatal(err)
		}
	}
	clk.pass(livenessTTL / 2)
	h.o.NodeSeen("n1", nil, nil, clk.now())
	clk.pass(livenessTTL/2 + time.Second)
	h.waitNodeState("n2", NodeDown)
	h.stop()
	h.stop = nil

	clk.pass(time.Minute)
	h = startStallable(t, path, clk, Config{})
	h.waitNodeState("n2", NodeDown)
	h.waitNodeState("n1", NodeUp)
	first := h.submit(api.SubmitRequest{Command: "a", GPUCount: gpus(1)})
	second := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(1)})
	if task := h.nextStart(); task.NodeID != "n1" || task.JobID != first.ID {
		t.Fatalf("start = %s on %s; want %s on n1", task.JobID, task.NodeID, first.ID)
	}
	h.noStart() // n2 is down: the second job waits

	if err := h.o.RegisterNode(ctx, registration("n2", 1), "10.0.0.8"); err != nil {
		t.Fatal(err)
	}
	h.waitNodeState("n2", NodeUp)
	if task := h.nextStart(); task.NodeID != "n2" || task.JobID != second.ID {
		t.Fatalf("start = %s on %s; want %s on n2", task.JobID, task.NodeID, second.ID)
	}
}

// A node stored down while it still holds a job (an engine that marks its
// nodes down and settles their jobs itself, and a server that stopped in
// between) comes back up for a TTL at the restart, so that its agent may
// confirm the job; the job is not left waiting on a node never checked.
func TestStoredDownNodeWithJobsRevived(t *testing.T) {
	clk := newStallClock()
	path := filepath.Join(t.TempDir(), "corral.db")
	h := startStallable(t, path, clk, Config{})
	jobs := runOn(h, clk, "n1")
	h.o.NodeDown("n1", clk.now())
	h.waitNodeState("n1", NodeDown)
	h.stop()
	h.stop = nil

	h = startStallable(t, path, clk, Config{Executor: &adoptingExec{}})
	h.waitNodeState("n1", NodeUp)
	if j, _ := h.o.Job(jobs["n1"]); j.State != api.StateRunning {
		t.Fatalf("adopted job: %s; want running", j.State)
	}
	clk.pass(livenessTTL + time.Second) // its agent never comes back
	h.waitNodeState("n1", NodeDown)
	h.waitState(jobs["n1"], api.StateQueued)
}
