package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/sched"
)

// The API's operations on holds are package holds' (holds.Ops), over
// the loop and holdCluster: the methods below are their delegates.
func (o *Orchestrator) holdOps() holds.Ops {
	return holds.Ops{Books: o.holds, Loop: loop{o}, Cluster: holdCluster{o.gpus, o}, Log: o.log}
}

// holdCluster is what a hold's operations ask of the loop's books
// (holds.Cluster, and holds.Releaser for the expiry): the GPU books
// themselves (Allocate), a placement kept off bookings, the jobs, a
// waiting hold's cap, and holds queued as jobs (holds.go). Write lock
// held, or the read lock for Job.
type holdCluster struct {
	*gpuBooks
	o *Orchestrator
}

func (c holdCluster) Place(tx feature.Tx, j sched.Job) sched.Result {
	now := tx.Now()
	return c.o.gpus.Place(now, j, c.o.bookings.At(now), c.o.jobs.Get) // kept off feature/bookings' intervals
}

func (c holdCluster) Capacity() jobspec.Capacity { return c.o.gpus.Capacity(c.o.cfg.Pools) }

func (c holdCluster) Job(id string) (job, queuedHold bool) {
	job = c.o.jobs.Get(id) != nil
	return job, c.o.holdJob(id) != nil
}

func (c holdCluster) CheckCap(user string, req api.AllocateRequest) error {
	return c.o.checkHoldCap(user, limits.Asked(req.GPUCount, req.GPUPart))
}

func (c holdCluster) Queue(tx feature.Tx, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error) {
	return c.o.queueHold(ownTxn(tx), req, user, d)
}

func (c holdCluster) Free(tx feature.Tx, h *api.Hold) api.Hold { return c.o.releaseHold(ownTxn(tx), h) }

// ReleaseHold frees an expired hold (holds.Releaser, for holds.Expiry).
func (c holdCluster) ReleaseHold(tx feature.Tx, h *api.Hold) { c.o.releaseHold(ownTxn(tx), h) }

// Cancel ends a hold that is a job: canceled like any job.
func (c holdCluster) Cancel(ctx context.Context, id string) (api.Hold, error) {
	j, _, err := c.o.Cancel(ctx, id, 0)
	if err != nil {
		return api.Hold{}, err
	}
	now := c.o.cfg.Now().UTC()
	return api.Hold{JobID: j.ID, Name: j.Hold, User: j.User, HeldAt: j.SubmittedAt, ReleasedAt: &now, Allocation: j.Allocation}, nil
}
