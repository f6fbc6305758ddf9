package daemon

import (
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/usage"
)

// registerBudgetAction adds --budget-action to `corral server` and `up`.
func registerBudgetAction(fl *pflag.FlagSet, v *string) {
	fl.StringVar(v, "budget-action", usage.ActionNotify, "what a budget at 100% does unless it names its own action: notify (only), preemptible (the user's or project's new jobs become batch work at the lowest priority) or hold (their queued jobs wait, reason budget_exhausted, until next month or corral budget release)")
}

func checkBudgetAction(a string) error {
	if !usage.ValidAction(a) {
		return cmdkit.Usagef("--budget-action %q: want notify, preemptible or hold", a)
	}
	return nil
}
