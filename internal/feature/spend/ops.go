package spend

import (
	"context"

	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/usage"
)

// Ops are the API's operations on budgets, prices and the ledger: each
// request checked before the loop is asked (a bad one changes nothing),
// each change one op of the loop's transaction, answered once durable,
// each read of the books under the loop's read lock.
type Ops struct {
	Books *Books
	Loop  feature.Loop
	Store Ledger // the stored ledger, for reports
}

// Usage reports the stored ledger over q's window, grouped and priced at
// today's prices. Bad input is an *api.Error naming the field.
func (o Ops) Usage(ctx context.Context, q Query) (usage.Report, error) {
	return Report(ctx, o.Store, q, o.Prices)
}

// Totals returns the all-time totals per user and project, for metrics.
func (o Ops) Totals() []Total { return feature.Read(o.Loop, o.Books.Totals) }

// Budgets returns every budget with its month-to-date status, by kind
// then name.
func (o Ops) Budgets() []usage.BudgetStatus { return feature.Read(o.Loop, o.Books.Budgets) }

// Prices returns a copy of the GPU prices (dollars per GPU-hour by model).
func (o Ops) Prices() usage.Prices { return feature.Read(o.Loop, o.Books.Prices) }

// SetBudget creates or replaces a budget, durably, and tells at once the
// thresholds its month-to-date spend already crossed.
func (o Ops) SetBudget(ctx context.Context, bg usage.Budget) (usage.BudgetStatus, error) {
	if err := CheckBudget(bg); err != nil {
		return usage.BudgetStatus{}, err
	}
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (usage.BudgetStatus, error) { return o.Books.SetBudget(tx, bg) })
}

// UnsetBudget removes a budget; 404 when there is none.
func (o Ops) UnsetBudget(ctx context.Context, kind, name string) error {
	_, err := o.Loop.Do(ctx, func(tx feature.Tx) (any, error) { return nil, o.Books.UnsetBudget(tx, kind, name) })
	return err
}

// ReleaseBudget lifts an exhausted budget's action until the next period
// (an admin's word); 404 when there is no such budget.
func (o Ops) ReleaseBudget(ctx context.Context, kind, name string) (usage.BudgetStatus, error) {
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (usage.BudgetStatus, error) { return o.Books.ReleaseBudget(tx, kind, name) })
}

// SetPrice sets a GPU model's price, durably. A bad model or price is an
// *api.Error naming the field (model, dollars_per_hour). Costs already
// counted in the metrics keep their price; reports price at today's.
func (o Ops) SetPrice(ctx context.Context, model string, dollarsPerHour float64) (usage.Prices, error) {
	if err := CheckPrice(model, dollarsPerHour); err != nil {
		return nil, err
	}
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (usage.Prices, error) { return o.Books.SetPrice(tx, model, dollarsPerHour) })
}

// UnsetPrice removes a GPU model's price; 404 when it has none.
func (o Ops) UnsetPrice(ctx context.Context, model string) (usage.Prices, error) {
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (usage.Prices, error) { return o.Books.UnsetPrice(tx, model) })
}
