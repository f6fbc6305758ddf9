package usage

import (
	"fmt"
	"math"
	"time"

	"github.com/corral-sched/corral/internal/lazyre"
)

// Budget kinds and actions.
const (
	BudgetUser    = "user"
	BudgetProject = "project"

	ActionNotify      = "notify"      // notifications only
	ActionPreemptible = "preemptible" // new jobs become preemptible batch work at the lowest priority
	ActionHold        = "hold"        // queued jobs wait (budget_exhausted) until the next period or a release
)

// ReasonBudgetExhausted is the pending reason of a job held by its
// user's or project's budget.
const ReasonBudgetExhausted = "budget_exhausted"

// Thresholds are the percentages at which a budget notifies, once each per
// period.
var Thresholds = []int{50, 80, 100}

// Budget is a monthly limit on a user's or project's usage, in GPU-hours
// or dollars (exactly one of them).
type Budget struct {
	Kind     string  `json:"kind"` // "user" or "project"
	Name     string  `json:"name"`
	GPUHours float64 `json:"gpu_hours,omitempty"`
	Dollars  float64 `json:"dollars,omitempty"`
	// Action at 100%: notify, preemptible or hold; empty: the server's
	// --budget-action.
	Action string `json:"action,omitempty"`
}

// Key is the budget's identity, "kind/name".
func (b Budget) Key() string { return b.Kind + "/" + b.Name }

var budgetName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// MaxBudget bounds a budget's gpu_hours and dollars (docs/limits.md).
const MaxBudget = 1e12

// ValidAction reports whether a is an action ("" is not).
func ValidAction(a string) bool {
	return a == ActionNotify || a == ActionPreemptible || a == ActionHold
}

// Valid reports what is wrong with the budget, naming the field.
func (b Budget) Valid() error {
	switch {
	case b.Kind != BudgetUser && b.Kind != BudgetProject:
		return fieldError{"kind", fmt.Sprintf("%q is not user or project", b.Kind)}
	case !budgetName.MatchString(b.Name):
		return fieldError{"name", fmt.Sprintf("%q is not a user or project name", b.Name)}
	case (b.GPUHours > 0) == (b.Dollars > 0):
		return fieldError{"gpu_hours", "give exactly one of gpu_hours and dollars, above 0"}
	case b.GPUHours < 0 || b.Dollars < 0 || math.IsNaN(b.GPUHours+b.Dollars) || math.IsInf(b.GPUHours+b.Dollars, 0):
		return fieldError{"gpu_hours", "a limit is a positive number"}
	case b.GPUHours > MaxBudget:
		return fieldError{"gpu_hours", fmt.Sprintf("%g is above the largest budget, %g", b.GPUHours, float64(MaxBudget))}
	case b.Dollars > MaxBudget:
		return fieldError{"dollars", fmt.Sprintf("%g is above the largest budget, %g", b.Dollars, float64(MaxBudget))}
	case b.Action != "" && !ValidAction(b.Action):
		return fieldError{"action", fmt.Sprintf("%q is not notify, preemptible or hold", b.Action)}
	}
	return nil
}

// fieldError is an error about one field of the input.
type fieldError struct{ field, msg string }

func (e fieldError) Error() string { return e.field + ": " + e.msg }

// Field is the name of the field an error from Valid is about; "" for
// other errors.
func Field(err error) string {
	if fe, ok := err.(fieldError); ok {
		return fe.field
	}
	return ""
}

// Spend is GPU-seconds and dollars.
type Spend struct {
	GPUSeconds float64
	Dollars    float64
}

// Percent is how much of the budget the spend is (0 and up).
func (b Budget) Percent(s Spend) float64 {
	if b.Dollars > 0 {
		return s.Dollars / b.Dollars * 100
	}
	if b.GPUHours > 0 {
		return s.GPUSeconds / 3600 / b.GPUHours * 100
	}
	return 0
}

// BudgetStatus is a budget as GET /budgets shows it.
type BudgetStatus struct {
	Budget
	EffectiveAction string  `json:"effective_action"` // Action, or the server's default
	Period          string  `json:"period"`           // "2026-11"
	UsedGPUHours    float64 `json:"used_gpu_hours"`
	UsedDollars     float64 `json:"used_dollars"`
	Percent         float64 `json:"percent"`
	Exhausted       bool    `json:"exhausted"` // at 100% or more
	Released        bool    `json:"released"`  // an admin lifted its action until the next period
	Notified        int     `json:"notified"`  // the highest threshold told this period (0, 50, 80, 100)
}

// MonthStart is the start (UTC) of t's calendar month: budgets' periods
// are calendar months in UTC.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Period is the name of t's month, "2026-11".
func Period(t time.Time) string { return t.UTC().Format("2006-01") }

// PriceRequest is the body of PUT /prices/{model}.
type PriceRequest struct {
	DollarsPerHour *float64 `json:"dollars_per_hour"`
}

// PriceList is GET /prices (and the answer of a change): dollars per
// GPU-hour by GPU model.
type PriceList struct {
	Prices Prices `json:"prices"`
}

// BudgetRequest is the body of PUT /budgets/{kind}/{name}: exactly one of
// gpu_hours and dollars; action empty: the server's --budget-action.
type BudgetRequest struct {
	GPUHours float64 `json:"gpu_hours,omitempty"`
	Dollars  float64 `json:"dollars,omitempty"`
	Action   string  `json:"action,omitempty"`
}

// BudgetList is GET /budgets.
type BudgetList struct {
	Budgets []BudgetStatus `json:"budgets"`
}
