package orchestrator

import (
	"context"
	"iter"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/feature/spend"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// The usage ledger, budgets and prices are package spend's (o.spend);
// here is what takes the loop's lock or makes its transactions: the
// tick's commits, the API's changes and reads, and the charge of an
// attempt lost with the previous server.

// spendCluster is what feature/spend reads of the books. Lock held.
type spendCluster struct{ o *Orchestrator }

func (c spendCluster) GPUModel(node string, gpu int) string { return c.o.nodes.GPUModel(node, gpu) }
func (c spendCluster) GPUHolder(node string, gpu int) string {
	return c.o.owner[gpuKey{node, gpu}]
}
func (c spendCluster) Reschedule() { c.o.dirty = true }

// Running yields the jobs in o.active.
func (c spendCluster) Running() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for id := range c.o.active {
			if j := c.o.jobs[id]; j != nil && !yield(j) {
				return
			}
		}
	}
}

// chargeLostAttempt charges an attempt lost with the previous server up
// to the last moment that server knew it alive (spend's AliveAt), to the
// job and in the ledger, in tx. From recover, before the job's
// transition (which gives the rows their reason).
func (o *Orchestrator) chargeLostAttempt(tx *txn, j *api.Job) {
	end := o.spend.AliveAt()
	if j.StartedAt == nil || !end.After(*j.StartedAt) {
		return
	}
	j.GPUSeconds += gpushare.Equivalents(j.Allocation) * end.Sub(*j.StartedAt).Seconds() // rebuildLedger counts it
	o.spend.ChargeAttempt(tx, j, end)
}

// chargeBookingIdle charges a booking's GPU time left idle to its booker
// (spend's ChargeBookingIdle: once per occurrence). Called when a window
// closes (bookings_tick.go). Write lock held.
func (tx *txn) chargeBookingIdle(r *api.Reservation, gpuSeconds float64) {
	tx.o.spend.ChargeBookingIdle(tx, r, gpuSeconds)
}

// heartbeat commits the time the running attempts were last known alive
// while any job holds GPUs, at most once a tick, after the budgets have
// looked at the running attempts. Loop only; a failed write is logged
// (the next tick tries again).
func (o *Orchestrator) heartbeat(ctx context.Context) {
	o.checkBudgetsRunning(ctx)
	o.mu.RLock()
	busy := len(o.active) > 0
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

// UsageQuery is what GET /usage asks.
type UsageQuery = spend.Query

// Usage reports the ledger over the window, grouped and priced at today's
// prices. It reads the store, not memory. Bad input is an *api.Error
// naming the field.
func (o *Orchestrator) Usage(ctx context.Context, q UsageQuery) (usage.Report, error) {
	return spend.Report(ctx, o.cfg.Store, q, o.Prices)
}

// UsageTotal is one user's and project's all-time charge, for metrics.
type UsageTotal = spend.Total

// UsageTotals returns the all-time totals per user and project.
func (o *Orchestrator) UsageTotals() []UsageTotal {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.spend.Totals()
}

// Budgets returns every budget with its month-to-date status, by kind
// then name.
func (o *Orchestrator) Budgets() []usage.BudgetStatus {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.spend.Budgets()
}

// SetBudget creates or replaces a budget, durably, and tells at once the
// thresholds its month-to-date spend already crossed.
func (o *Orchestrator) SetBudget(ctx context.Context, b usage.Budget) (usage.BudgetStatus, error) {
	if err := spend.CheckBudget(b); err != nil {
		return usage.BudgetStatus{}, err
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) { return o.spend.SetBudget(tx, b) })
	if err != nil {
		return usage.BudgetStatus{}, err
	}
	return v.(usage.BudgetStatus), nil
}

// UnsetBudget removes a budget; 404 when there is none.
func (o *Orchestrator) UnsetBudget(ctx context.Context, kind, name string) error {
	_, err := o.do(ctx, func(tx *txn) (any, error) { return nil, o.spend.UnsetBudget(tx, kind, name) })
	return err
}

// ReleaseBudget lifts an exhausted budget's action until the next period
// (an admin's word); 404 when there is no such budget.
func (o *Orchestrator) ReleaseBudget(ctx context.Context, kind, name string) (usage.BudgetStatus, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) { return o.spend.ReleaseBudget(tx, kind, name) })
	if err != nil {
		return usage.BudgetStatus{}, err
	}
	return v.(usage.BudgetStatus), nil
}

// Prices returns a copy of the GPU prices (dollars per GPU-hour by model).
func (o *Orchestrator) Prices() usage.Prices {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.spend.Prices()
}

// SetPrice sets a GPU model's price, durably. A bad model or price is an
// *api.Error naming the field (model, dollars_per_hour). Costs already
// counted in the metrics keep their price; reports price at today's.
func (o *Orchestrator) SetPrice(ctx context.Context, model string, dollarsPerHour float64) (usage.Prices, error) {
	if err := spend.CheckPrice(model, dollarsPerHour); err != nil {
		return nil, err
	}
	return o.changePrices(ctx, func(tx *txn) (usage.Prices, error) { return o.spend.SetPrice(tx, model, dollarsPerHour) })
}

// UnsetPrice removes a GPU model's price; 404 when it has none.
func (o *Orchestrator) UnsetPrice(ctx context.Context, model string) (usage.Prices, error) {
	return o.changePrices(ctx, func(tx *txn) (usage.Prices, error) { return o.spend.UnsetPrice(tx, model) })
}

func (o *Orchestrator) changePrices(ctx context.Context, change func(*txn) (usage.Prices, error)) (usage.Prices, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) { return change(tx) })
	if err != nil {
		return nil, err
	}
	return v.(usage.Prices), nil
}
