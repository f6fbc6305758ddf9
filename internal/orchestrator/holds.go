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

// Holds as interactive allocations (docs/interactive.md): the holds
// themselves, their expiry, their share of the snapshot and their note in
// why-pending are package holds' (o.holds); here is what touches the
// loop's books: GPUs freed, usage charged, and the hold asked with
// "wait": true that cannot be granted now, queued as an interactive job
// whose process only sleeps for the hold's duration (it waits, starts,
// is counted and ends like any job, and its job id is the hold's id from
// then on).

// holdJob returns the job a queued hold became, if id is one. Lock held.
func (o *Orchestrator) holdJob(id string) *api.Job {
	if j := o.jobs.Get(id); j != nil && j.Hold != "" {
		return j
	}
	return nil
}

// The API's operations on holds are package holds' (holds.Ops), over
// the loop and holdCluster: the methods below are their delegates.
func (o *Orchestrator) holdOps() holds.Ops {
	return holds.Ops{Books: o.holds, Loop: loop{o}, Cluster: holdCluster{o.gpus, o}, Log: o.log}
}

// holdCluster is what a hold's operations ask of the loop's books
// (holds.Cluster, and holds.Releaser for the expiry): the GPU books
// themselves (Allocate), a placement kept off bookings, the jobs, a
// waiting hold's cap, and holds queued as jobs. Write lock
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

// Queue queues a hold that waits as the interactive job it becomes
// (holds.AsJob).
func (c holdCluster) Queue(tx feature.Tx, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error) {
	o := c.o
	sreq, limit := holds.AsJob(req, user, d)
	r, err := o.submit(ownTxn(tx), &sreq, "", false)
	if err != nil {
		return api.Hold{}, err
	}
	j := o.jobs.Get(r.job.ID)
	j.Hold = req.JobID
	j.TimeLimit = &limit
	o.log.Info("hold queued", "hold", req.JobID, "job_id", j.ID, "gpus", req.GPUCount, "duration", d)
	return api.Hold{JobID: j.ID, Name: req.JobID, User: user, HeldAt: tx.Now(), Allocation: []api.Allocation{},
		Queued: true, Poll: "/queue/" + j.ID}, nil
}

// Free frees a hold's GPUs in tx and charges its GPU time to its user's
// usage.
func (c holdCluster) Free(tx feature.Tx, h *api.Hold) api.Hold {
	o := c.o
	o.gpus.Release(h.JobID, h.Allocation)
	o.dirty = true
	now := tx.Now()
	gs, err := o.holds.Ended(tx, h, o.ledger.HalfLife())
	if err != nil {
		o.log.Error("hold usage not stored", "hold", h.JobID, "err", err)
	}
	if gs > 0 {
		o.ledger.Add(h.User, holds.Project, gs, now)
		o.spend.ChargeHold(tx, h, holds.Project, "released") // feature/spend: the ledger's rows
	}
	out := *h
	out.ReleasedAt = &now
	return out
}

// ReleaseHold frees an expired hold (holds.Releaser, for holds.Expiry).
func (c holdCluster) ReleaseHold(tx feature.Tx, h *api.Hold) { c.Free(tx, h) }

// Cancel ends a hold that is a job: canceled like any job.
func (c holdCluster) Cancel(ctx context.Context, id string) (api.Hold, error) {
	j, _, err := c.o.Cancel(ctx, id, 0)
	if err != nil {
		return api.Hold{}, err
	}
	now := c.o.cfg.Now().UTC()
	return api.Hold{JobID: j.ID, Name: j.Hold, User: j.User, HeldAt: j.SubmittedAt, ReleasedAt: &now, Allocation: j.Allocation}, nil
}
