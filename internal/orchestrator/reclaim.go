package orchestrator

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/reclaim"
	"github.com/corral-sched/corral/internal/notify"
)

// Idle reclaim of interactive work: the rules are package reclaim's
// (o.reclaim); here the loop walks its running jobs, asks what to do with
// each, and does it: the warning's row and notification, and the stop,
// as a preemption's (the notice, SIGTERM, the grace, SIGKILL).

// checkInteractiveIdle warns, then ends, idle interactive jobs. Loop only.
func (o *Orchestrator) checkInteractiveIdle(ctx context.Context) {
	now := o.cfg.Now()
	o.mu.Lock()
	tx := o.begin()
	for id := range o.active {
		j := o.jobs[id]
		c := o.policy.Classes[j.Class]
		v, ends := o.reclaim.Look(j, c, now, o.gpuUtil)
		switch v {
		case reclaim.InUse:
			if j.IdleEndsAt != nil {
				j.IdleEndsAt = nil
				tx.touch(j)
				o.log.Info("interactive job in use again", "job_id", id)
			}
			continue
		case reclaim.Warn, reclaim.Reclaim:
			if j.IdleEndsAt == nil {
				j.IdleEndsAt = &ends
				tx.touch(j)
				o.notes.Job(j, notify.JobIdleWarning, now)
				o.log.Warn("interactive job idle: it ends unless used", "job_id", id, "user", j.User, "ends_at", ends)
			}
		}
		if v == reclaim.Reclaim {
			o.reclaimIdle(ctx, tx, j, c)
		}
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("idle reclaim not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// reclaimIdle ends an idle interactive job as a preemption would stop it:
// the notice, SIGTERM, its grace, SIGKILL; it ends canceled with reason
// idle (exitOutcome). Lock held, in tx.
func (o *Orchestrator) reclaimIdle(ctx context.Context, tx *txn, j *api.Job, c api.ClassIdle) {
	j.IdleReclaimed, j.CancelRequested = true, true
	if j.IdleEndsAt == nil {
		t := tx.now
		j.IdleEndsAt = &t
	}
	tx.touch(j)
	o.reclaim.Reclaimed(j.ID)
	grace := o.policy.PreemptGrace.Duration()
	if j.PreemptGrace != nil {
		grace = j.PreemptGrace.Duration()
	}
	id, attempt := j.ID, j.RetryCount
	notice := reclaim.Notice(tx.now, c, grace)
	o.log.Info("idle interactive job ending", "job_id", id, "user", j.User, "grace", grace)
	tx.after = append(tx.after, func() {
		ctx := context.WithoutCancel(ctx)
		if n, ok := o.cfg.Executor.(exec.Noticer); ok {
			if err := n.Notice(ctx, id, attempt, notice); err != nil {
				o.log.Warn("idle notice not written", "job_id", id, "err", err)
			}
		}
		if err := o.cfg.Executor.Stop(ctx, id, attempt, grace); err != nil {
			o.log.Error("stop idle job", "job_id", id, "err", err)
		}
	})
}

// gpuUtil reads a GPU's last utilization from its node's report (a
// reclaim.Util). Lock held.
func (o *Orchestrator) gpuUtil(nodeID string, gpu int) (pct int, node, read bool) {
	i, ok := o.nodeIndex[nodeID]
	if !ok {
		return 0, false, false
	}
	for _, r := range o.nodes[i].readings {
		if r.Index == gpu {
			return r.Utilization, true, true
		}
	}
	return 0, true, false
}
