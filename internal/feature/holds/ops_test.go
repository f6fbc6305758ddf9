package holds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/featuretest"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/sched"
)

// fakeCluster is a cluster of free GPUs on one node, and the jobs by id
// (true: a hold queued as a job).
type fakeCluster struct {
	free     int
	jobs     map[string]bool
	capErr   error
	queued   []string
	freed    []string
	canceled []string
}

func (c *fakeCluster) Place(_ feature.Tx, j sched.Job) sched.Result {
	if j.GPUs > c.free {
		return sched.Result{Pending: []sched.Pending{{JobID: j.ID, Reason: "insufficient_gpus"}}}
	}
	gpus := make([]int, j.GPUs)
	for i := range gpus {
		gpus[i] = i
	}
	return sched.Result{Starts: []sched.Start{{JobID: j.ID, Placements: []sched.Placement{{NodeID: "n1", GPUs: gpus}}}}}
}

func (c *fakeCluster) Allocate(_, _ string, ps []sched.Placement) []api.Allocation {
	var out []api.Allocation
	for _, g := range ps[0].GPUs {
		out = append(out, api.Allocation{NodeID: ps[0].NodeID, GPUID: g})
	}
	c.free -= len(out)
	return out
}

func (c *fakeCluster) Capacity() jobspec.Capacity {
	return jobspec.Capacity{Nodes: 1, MaxGPUs: 4, LargestNode: "n1", MaxMemoryGB: 80, Models: []string{"H100"}}
}

func (c *fakeCluster) Job(id string) (job, queuedHold bool) { q, ok := c.jobs[id]; return ok, q }

func (c *fakeCluster) CheckCap(string, api.AllocateRequest) error { return c.capErr }

func (c *fakeCluster) Queue(_ feature.Tx, req api.AllocateRequest, user string, _ time.Duration) (api.Hold, error) {
	c.queued = append(c.queued, req.JobID)
	return api.Hold{JobID: "j9", Name: req.JobID, User: user, Queued: true}, nil
}

func (c *fakeCluster) Free(tx feature.Tx, h *api.Hold) api.Hold {
	c.freed = append(c.freed, h.JobID)
	c.free += len(h.Allocation)
	out := *h
	now := tx.Now()
	out.ReleasedAt = &now
	return out
}

func (c *fakeCluster) Cancel(_ context.Context, id string) (api.Hold, error) {
	c.canceled = append(c.canceled, id)
	return api.Hold{JobID: id}, nil
}

// TestOps follows a hold's operations through a fake loop: a request
// that fails its own checks is refused before the loop is asked, naming
// its field; one that fails against the books, in the loop, changing
// nothing; a hold granted is one Do whose batch holds it; a release frees
// it; a queued hold is canceled as the job it is, outside Do.
func TestOps(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	c := &fakeCluster{free: 4, jobs: map[string]bool{"train": false, "waiting": true}}
	b := New(time.Hour)
	l := &featuretest.Loop{Now: now}
	o := Ops{Books: b, Loop: l, Cluster: c, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	hold := func(id string, gpus int, wait bool) func() error {
		return func() error {
			_, err := o.Hold(ctx, api.AllocateRequest{JobID: id, GPUCount: gpus, Wait: wait}, "ana")
			return err
		}
	}
	release := func(id string) func() error { return func() error { _, err := o.Release(ctx, id); return err } }
	for _, tc := range []struct {
		name   string
		op     func() error
		status int
		field  string
		code   string
		dos    int // the loop's ops so far
	}{
		{"no name", hold(" ", 1, false), 422, "job_id", "", 0},
		{"no GPUs", hold("x", 0, false), 422, "gpu_count", "", 0},
		{"more than the largest node", hold("x", 5, false), 422, "gpu_count", "", 1},
		{"a job's name", hold("train", 1, false), 409, "", "job_exists", 2},
		{"granted", hold("nb", 3, false), 0, "", "", 3},
		{"held already", hold("nb", 1, false), 409, "", "hold_exists", 4},
		{"not free now", hold("nb2", 2, false), 409, "", "insufficient_gpus", 5},
		{"waits", hold("nb2", 2, true), 0, "", "", 6},
		{"release a job", release("train"), 409, "", "not_a_hold", 7},
		{"release unknown", release("nope"), 404, "", "", 8},
		{"released", release("nb"), 0, "", "", 9},
		{"release a queued hold", release("waiting"), 0, "", "", 9},
	} {
		err := tc.op()
		var ae *api.Error
		if tc.status == 0 && err != nil || tc.status != 0 && (!errors.As(err, &ae) || ae.Status != tc.status || ae.Field != tc.field || tc.code != "" && ae.Code != tc.code) {
			t.Fatalf("%s: error %v, want status %d field %q code %q", tc.name, err, tc.status, tc.field, tc.code)
		}
		if l.Dos != tc.dos {
			t.Fatalf("%s: the loop was asked %d times, want %d", tc.name, l.Dos, tc.dos)
		}
	}
	if len(l.Txs) != 3 || len(l.Txs[0].B.Holds) != 1 || l.Txs[0].B.Holds[0].JobID != "nb" {
		t.Fatalf("committed %d transactions; the first's holds %+v", len(l.Txs), l.Txs[0].B.Holds)
	}
	h := l.Txs[0].B.Holds[0]
	if len(h.Allocation) != 3 || h.ExpiresAt == nil || !h.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("the hold stored: %+v", h)
	}
	if len(c.queued) != 1 || c.queued[0] != "nb2" || len(c.freed) != 1 || c.free != 4 || len(c.canceled) != 1 {
		t.Errorf("queued %v, freed %v (free %d), canceled %v", c.queued, c.freed, c.free, c.canceled)
	}
}

// TestOpsCap: a hold asked with wait is refused at the cap on waiting
// holds; one without wait is not capped.
func TestOpsCap(t *testing.T) {
	ctx := context.Background()
	capErr := api.Conflict("hold_limit", "too many")
	c := &fakeCluster{free: 4, capErr: capErr}
	l := &featuretest.Loop{Now: time.Unix(0, 0)}
	o := Ops{Books: New(0), Loop: l, Cluster: c, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := o.Hold(ctx, api.AllocateRequest{JobID: "a", GPUCount: 1, Wait: true}, "ana"); !errors.Is(err, capErr) {
		t.Errorf("wait at the cap: %v, want the cap's refusal", err)
	}
	if _, err := o.Hold(ctx, api.AllocateRequest{JobID: "a", GPUCount: 1}, "ana"); err != nil {
		t.Errorf("no wait at the cap: %v", err)
	}
}
