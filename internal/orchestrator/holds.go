package orchestrator

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/holds"
)

// Holds as interactive allocations (docs/interactive.md): the holds
// themselves, their expiry, their share of the snapshot and their note in
// why-pending are package holds' (o.holds); here is what touches the
// loop's books: GPUs freed, usage charged, and the hold asked with
// "wait": true that cannot be granted now, queued as an interactive job
// whose process only sleeps for the hold's duration (it waits, starts,
// is counted and ends like any job, and its job id is the hold's id from
// then on).

// queueHold queues a hold that waits as the interactive job it becomes
// (holds.AsJob). Loop only, in tx.
func (o *Orchestrator) queueHold(tx *txn, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error) {
	sreq, limit := holds.AsJob(req, user, d)
	r, err := o.submit(tx, &sreq, "", false)
	if err != nil {
		return api.Hold{}, err
	}
	j := o.jobs.Get(r.job.ID)
	j.Hold = req.JobID
	j.TimeLimit = &limit
	o.log.Info("hold queued", "hold", req.JobID, "job_id", j.ID, "gpus", req.GPUCount, "duration", d)
	return api.Hold{JobID: j.ID, Name: req.JobID, User: user, HeldAt: tx.now, Allocation: []api.Allocation{},
		Queued: true, Poll: "/queue/" + j.ID}, nil
}

// holdJob returns the job a queued hold became, if id is one. Lock held.
func (o *Orchestrator) holdJob(id string) *api.Job {
	if j := o.jobs.Get(id); j != nil && j.Hold != "" {
		return j
	}
	return nil
}

// releaseHold frees a hold's GPUs in tx and charges its GPU time to its
// user's usage. Loop only.
func (o *Orchestrator) releaseHold(tx *txn, h *api.Hold) api.Hold {
	o.gpus.Release(h.JobID, h.Allocation)
	o.dirty = true
	gs, err := o.holds.Ended(tx, h, o.ledger.HalfLife())
	if err != nil {
		o.log.Error("hold usage not stored", "hold", h.JobID, "err", err)
	}
	if gs > 0 {
		o.ledger.Add(h.User, holds.Project, gs, tx.now)
		o.spend.ChargeHold(tx, h, holds.Project, "released") // feature/spend: the ledger's rows
	}
	out := *h
	now := tx.now
	out.ReleasedAt = &now
	return out
}
