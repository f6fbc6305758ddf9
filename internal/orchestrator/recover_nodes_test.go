package orchestrator

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store"
)

// adoptRecorder is adoptingExec that keeps the tasks it is told to adopt.
type adoptRecorder struct {
	*fakeExec
	mu      sync.Mutex
	adopted []exec.Task
}

func (a *adoptRecorder) Adopt(_ context.Context, t exec.Task) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.adopted = append(a.adopted, t)
	return nil
}

// startRecording is startStallable with an adoptRecorder for executor.
func startRecording(t *testing.T, path string, clk *stallClock) (*harness, *adoptRecorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &adoptRecorder{fakeExec: newFakeExec()}
	o, err := New(ctx, Config{Store: st, DataDir: t.TempDir(), Executor: rec,
		NodeTTL: livenessTTL, Tick: 10 * time.Millisecond, Now: clk.now, Clock: clk.clock})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	h := &harness{t: t, o: o, ex: rec.fakeExec, path: path}
	h.stop = func() { cancel(); <-done; st.Close() }
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
	return h, rec
}

// runWithoutGPUs registers the nodes (one GPU each, labelled host=NAME)
// and runs a job of no GPUs on node on, reported started.
func runWithoutGPUs(h *harness, clk *stallClock, nodes []string, on string) api.Job {
	h.t.Helper()
	for _, n := range nodes {
		reg := registration(n, 1)
		reg.Labels = map[string]string{"host": n}
		if err := h.o.RegisterNode(context.Background(), reg, "10.0.0.7"); err != nil {
			h.t.Fatal(err)
		}
	}
	j := h.submit(api.SubmitRequest{Command: "prep", GPUCount: gpus(0), NodeLabels: map[string]string{"host": on}})
	if task := h.nextStart(); task.JobID != j.ID || task.NodeID != on {
		h.t.Fatalf("started %s on %q; want %s on %s", task.JobID, task.NodeID, j.ID, on)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
	j = h.waitState(j.ID, api.StateRunning)
	if j.NodeID != on || len(j.Allocation) != 0 {
		h.t.Fatalf("running job: node_id %q, allocation %+v; want node_id %s and no GPUs", j.NodeID, j.Allocation, on)
	}
	return j
}

// A job of no GPUs that runs when the server is killed is adopted on the
// node it was placed on, whatever the cluster's size (its allocation names
// no node: the job records it), and is settled by its agent's report with
// its real exit code: never lost, never run again.
func TestJobsWithoutGPUsAdoptedOnAnyCluster(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		on    string
	}{
		{"one node", []string{"n1"}, "n1"},
		{"two nodes, on the first", []string{"n1", "n2"}, "n1"},
		{"two nodes, on the second", []string{"n1", "n2"}, "n2"},
		{"three nodes, on the last", []string{"n1", "n2", "n3"}, "n3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newStallClock()
			path := filepath.Join(t.TempDir(), "corral.db")
			h := startStallable(t, path, clk, Config{})
			j := runWithoutGPUs(h, clk, tc.nodes, tc.on)
			h.stop() // the kill: the store has what was committed
			h.stop = nil

			h, rec := startRecording(t, path, clk)
			got, _ := h.o.Job(j.ID)
			if got.State != api.StateRunning || got.RetryCount != 0 {
				t.Fatalf("after the restart the job is %s (%s: %s), retry %d; want running, adopted", got.State, got.Reason, got.Message, got.RetryCount)
			}
			rec.mu.Lock()
			adopted := slices.Clone(rec.adopted)
			rec.mu.Unlock()
			if len(adopted) != 1 || adopted[0].JobID != j.ID || adopted[0].NodeID != tc.on || len(adopted[0].GPUs) != 0 ||
				len(adopted[0].Ranks) != 1 || adopted[0].Ranks[0].NodeID != tc.on {
				t.Fatalf("adopted %+v; want %s on %s with no GPUs", adopted, j.ID, tc.on)
			}
			h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: clk.now(), ExitCode: 0})
			got = h.waitState(j.ID, api.StateCompleted)
			if got.ExitCode == nil || *got.ExitCode != 0 || got.RetryCount != 0 || got.NodeID != tc.on {
				t.Fatalf("ended job: exit %v, retry %d, node_id %q; want exit 0 in its first attempt on %s", got.ExitCode, got.RetryCount, got.NodeID, tc.on)
			}
		})
	}
}

// A job of no GPUs is settled with its node when that node goes silent
// past the TTL (node_lost), as a job holding GPUs there is; a job of no
// GPUs on another node runs on; a draining node counts its jobs of no
// GPUs.
func TestJobWithoutGPUsLostWithItsNode(t *testing.T) {
	clk := newStallClock()
	h := startStallable(t, filepath.Join(t.TempDir(), "corral.db"), clk, Config{})
	lost := runWithoutGPUs(h, clk, []string{"n1", "n2"}, "n2")
	kept := h.submit(api.SubmitRequest{Command: "prep", GPUCount: gpus(0), NodeLabels: map[string]string{"host": "n1"}})
	h.nextStart()
	h.o.Sink(exec.Update{JobID: kept.ID, Kind: exec.Started, At: clk.now()})
	h.waitState(kept.ID, api.StateRunning)
	if _, err := h.o.SetNodeState(context.Background(), "n1", "drain"); err != nil {
		t.Fatal(err)
	}
	h.waitNodeState("n1", NodeDraining) // not drained: a job of no GPUs runs there

	clk.pass(livenessTTL / 2)
	h.o.NodeSeen("n1", nil, nil, clk.now())
	clk.pass(livenessTTL/2 + time.Second)
	h.waitNodeState("n2", NodeDown)
	if j := h.waitState(lost.ID, api.StateFailed); j.Reason != api.ReasonNodeLost {
		t.Fatalf("job on the lost node: %s (%s); want failed node_lost", j.State, j.Reason)
	}
	if j, _ := h.o.Job(kept.ID); j.State != api.StateRunning {
		t.Fatalf("job on the live node: %s (%s); want running", j.State, j.Reason)
	}
}
