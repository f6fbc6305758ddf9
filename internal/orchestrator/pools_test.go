package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestPoolsPlaceJobsOnTheirNodes(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	h := startConfig(t, filepath.Join(t.TempDir(), "corral.db"), Config{NodeTTL: 30 * time.Second, Tick: 10 * time.Millisecond, Now: clk.now,
		Pools: []string{api.PoolAgents, api.PoolRay}})
	ctx := context.Background()
	h.o.RegisterNode(ctx, registration("box", 2), "") // no pool label: agents
	r := registration("ray-10.0.0.1", 2)
	r.Labels = map[string]string{"pool": "ray"}
	h.o.RegisterNode(ctx, r, "")

	cs := h.o.Cluster(ctx)
	pools := map[string]string{}
	for _, n := range cs.Nodes {
		pools[n.NodeID] = n.Pool
	}
	if pools["box"] != "agents" || pools["ray-10.0.0.1"] != "ray" {
		t.Fatalf("node pools %v", pools)
	}
	for _, c := range []struct{ pool, node string }{{"ray", "ray-10.0.0.1"}, {"agents", "box"}, {"ray", "ray-10.0.0.1"}} {
		j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), Pool: c.pool})
		if j.Pool != c.pool || j.NodeLabels["pool"] != c.pool {
			t.Fatalf("job %+v: pool %q labels %v", j.ID, j.Pool, j.NodeLabels)
		}
		if task := h.nextStart(); task.JobID != j.ID || task.NodeID != c.node {
			t.Fatalf("pool %s job went to %s, want %s", c.pool, task.NodeID, c.node)
		}
	}
	// The ray node is full: a third ray job waits although box has a GPU.
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), Pool: "ray"})
	h.noStart()
	if got, _ := h.o.Job(j.ID); got.State != api.StateQueued {
		t.Fatalf("%+v", got)
	}

	for _, c := range []struct {
		name string
		req  api.SubmitRequest
	}{
		{"unknown pool", api.SubmitRequest{Command: "x", Pool: "slurm"}},
		{"bad name", api.SubmitRequest{Command: "x", Pool: "Ray Cluster"}},
		{"label disagrees", api.SubmitRequest{Command: "x", Pool: "ray", NodeLabels: map[string]string{"pool": "agents"}}},
	} {
		_, _, err := h.o.Submit(ctx, c.req, "")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Field != "pool" || ae.Status != 422 {
			t.Errorf("%s: %v, want a 422 naming pool", c.name, err)
		}
	}
}
