package orchestrator

import (
	"context"
	"strconv"
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

// queueHold queues a hold that waits as an interactive job sleeping for
// its duration. Loop only, in tx.
func (o *Orchestrator) queueHold(tx *txn, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error) {
	n := req.GPUCount
	secs := int64(d / time.Second)
	sreq := api.SubmitRequest{Name: req.JobID, User: user, Command: "sleep " + strconv.FormatInt(secs, 10),
		GPUCount: &n, GPUMemoryGB: req.MemoryGB, GPUType: req.GPUType, Class: api.ClassInteractive,
		TimeLimit: api.RawValue(strconv.Quote(d.String()))}
	r, err := o.submit(tx, &sreq, "", false)
	if err != nil {
		return api.Hold{}, err
	}
	j := o.jobs[r.job.ID]
	j.Hold = req.JobID
	// The process ends the hold at its duration; the time limit, a minute
	// later, is a backstop.
	limit := api.Seconds((d + time.Minute).Seconds())
	j.TimeLimit = &limit
	o.log.Info("hold queued", "hold", req.JobID, "job_id", j.ID, "gpus", n, "duration", d)
	return api.Hold{JobID: j.ID, Name: req.JobID, User: user, HeldAt: tx.now, Allocation: []api.Allocation{},
		Queued: true, Poll: "/queue/" + j.ID}, nil
}

// holdJob returns the job a queued hold became, if id is one. Lock held.
func (o *Orchestrator) holdJob(id string) *api.Job {
	if j := o.jobs[id]; j != nil && j.Hold != "" {
		return j
	}
	return nil
}

// releaseHoldJob ends a hold that is a job: canceled like any job.
func (o *Orchestrator) releaseHoldJob(ctx context.Context, id string) (api.Hold, error) {
	j, _, err := o.Cancel(ctx, id, 0)
	if err != nil {
		return api.Hold{}, err
	}
	now := o.cfg.Now().UTC()
	return api.Hold{JobID: j.ID, Name: j.Hold, User: j.User, HeldAt: j.SubmittedAt, ReleasedAt: &now, Allocation: j.Allocation}, nil
}

// releaseHold frees a hold's GPUs in tx and charges its GPU time to its
// user's usage. Loop only.
func (o *Orchestrator) releaseHold(tx *txn, h *api.Hold) api.Hold {
	for _, a := range h.Allocation {
		k := gpuKey{a.NodeID, a.GPUID}
		if o.owner[k] == h.JobID {
			delete(o.owner, k)
		}
	}
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

// checkHolds ends every hold past its expiry. Loop only.
func (o *Orchestrator) checkHolds(ctx context.Context) {
	now := o.cfg.Now()
	o.inTx(ctx, "hold expiry", func(tx *txn) bool {
		due := o.holds.Due(now)
		for _, h := range due {
			o.releaseHold(tx, h)
			o.log.Info("hold expired; GPUs released", "hold", h.JobID, "user", h.User)
		}
		return len(due) > 0
	})
}
