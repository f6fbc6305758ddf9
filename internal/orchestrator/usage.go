package orchestrator

import (
	"context"

	"github.com/corral-sched/corral/internal/feature/spend"
	"github.com/corral-sched/corral/internal/gpubook"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/store"
)

// The usage ledger, budgets and prices are package spend's (o.spend),
// with the API's operations (spend.Ops, through FeatureOps.Spend); here
// is what the feature reads of the books (spendCluster) and the tick's
// commits.

// spendCluster is what feature/spend reads of the books: the books
// themselves (the job books' Active, the GPU books' GPUModel and Owner),
// and the loop's Reschedule. Lock held.
type spendCluster struct {
	*jobbook.Book
	*gpuBooks
	o *Orchestrator
}

// gpuBooks names the GPU books where a type embeds them beside the job
// books (two embedded fields cannot both be named Book).
type gpuBooks = gpubook.Book

func (c spendCluster) Reschedule() { c.o.dirty = true }

// heartbeat commits the time the running attempts were last known alive
// while any job holds GPUs, at most once a tick, after the budgets have
// looked at the running attempts. Loop only; a failed write is logged
// (the next tick tries again).
func (o *Orchestrator) heartbeat(ctx context.Context) {
	o.checkBudgetsRunning(ctx)
	o.mu.RLock()
	busy := o.jobs.ActiveLen() > 0
	o.mu.RUnlock()
	now := o.cfg.Now().UTC()
	if !busy {
		return
	}
	b := &store.Batch{Settings: spend.AliveSetting(now)}
	if err := o.cfg.Log.Commit(ctx, b); err != nil {
		o.log.Debug("heartbeat not committed", "err", err)
		return
	}
	o.mu.Lock()
	o.spend.Beat(now)
	o.mu.Unlock()
}

// checkBudgetsRunning tells, in a transaction of its own, the thresholds
// that running attempts made budgets cross. Each tick; loop only.
func (o *Orchestrator) checkBudgetsRunning(ctx context.Context) {
	o.mu.Lock()
	if !o.spend.HasBudgets() {
		o.mu.Unlock()
		return
	}
	tx := o.begin()
	o.spend.CheckRunning(tx)
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("budget notifications not committed", "err", err)
	}
}
