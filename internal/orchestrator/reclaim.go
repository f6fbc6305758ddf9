package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/nodebook"
)

// Timed work on the running jobs is the features' (feature/limits' time
// limits, feature/reclaim's idle reclaim); here is the loop's side: the
// tick's transaction, and the running work as they see it (running).

// timeLimits is the time limits' tick (limits.Timer), which the loop
// also runs when the earliest limit is due (its limits.Alarm fired).
func (o *Orchestrator) timeLimits() limits.Timer {
	return limits.Timer{Notes: o.notes, Grace: o.cfg.CancelGrace, Arm: o.limits.Arm, Now: o.cfg.Now, Log: o.log}
}

// inTx runs step, a ticker's work, in a transaction of its own under the
// lock, and commits it unless step says there is nothing to commit; what
// follows the commit (executor calls) runs once the lock is released.
// what names the work in the log. Loop only.
func (o *Orchestrator) inTx(ctx context.Context, what string, step func(tx *txn) bool) {
	o.mu.Lock()
	tx := o.begin()
	if !step(tx) {
		o.mu.Unlock()
		return
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error(what+" not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// running is the running work as the timed features see it
// (feature.Running), for one tick: the job books themselves (Active),
// and a row touched or a stop asked in the loop's transaction; ctx is
// the tick's, which the executor's calls outlive. Lock held.
type running struct {
	*jobbook.Book
	o   *Orchestrator
	ctx context.Context
}

func (r running) Touch(tx feature.Tx, j *api.Job) { ownTxn(tx).touch(j) }

func (r running) Stop(tx feature.Tx, j *api.Job, grace time.Duration, notice, failed string) {
	o, id, attempt := r.o, j.ID, j.RetryCount
	t := ownTxn(tx)
	t.after = append(t.after, func() {
		ctx := context.WithoutCancel(r.ctx)
		if n, ok := o.cfg.Executor.(exec.Noticer); ok && notice != "" {
			if err := n.Notice(ctx, id, attempt, notice); err != nil {
				o.log.Warn("idle notice not written", "job_id", id, "err", err)
			}
		}
		if err := o.cfg.Executor.Stop(ctx, id, attempt, grace); err != nil {
			o.log.Error(failed, "job_id", id, "err", err)
		}
	})
}

// reclaimCluster is what idle reclaim reads of the books at its tick
// (reclaim.Cluster): the node books themselves (Util), and the policy.
// Lock held.
type reclaimCluster struct {
	*nodebook.Book
	o *Orchestrator
}

func (c reclaimCluster) Class(name string) api.ClassIdle { return c.o.policy.Classes[name] }
func (c reclaimCluster) PreemptGrace() time.Duration     { return c.o.policy.PreemptGrace.Duration() }
