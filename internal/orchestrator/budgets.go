package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/usage"
)

// Store keys of budgets: their definitions (JSON: key -> usage.Budget)
// and the period's state (which thresholds were told, which budgets an
// admin released), both written in the transaction that changes them.
const (
	settingBudgets     = "budgets"
	settingBudgetState = "budget_state"
)

// monthBooks is the month-to-date spend per user and per project, kept
// from the ledger (read at start-up with one query, then added to as rows
// are written).
type monthBooks struct {
	start   time.Time // the month's first instant (UTC)
	user    map[string]*usage.Spend
	project map[string]*usage.Spend
}

func (m *monthBooks) init(now time.Time) {
	m.start = usage.MonthStart(now)
	m.user, m.project = map[string]*usage.Spend{}, map[string]*usage.Spend{}
}

// add counts the part of r in the month.
func (m *monthBooks) add(r usage.Record, price float64) {
	if m.start.IsZero() {
		return
	}
	gs, _ := r.Clip(m.start, time.Time{})
	if gs == 0 {
		return
	}
	for _, s := range []*usage.Spend{spendOf(m.user, r.User), spendOf(m.project, r.Project)} {
		s.GPUSeconds += gs
		s.Dollars += gs / 3600 * price
	}
}

func spendOf(m map[string]*usage.Spend, k string) *usage.Spend {
	s := m[k]
	if s == nil {
		s = &usage.Spend{}
		m[k] = s
	}
	return s
}

// budgetBooks are the budgets and the period's state.
type budgetBooks struct {
	budgets map[string]usage.Budget // by Key
	state   budgetState
}

// budgetState is what a period remembers, stored as JSON.
type budgetState struct {
	Period   string          `json:"period"`
	Notified map[string]int  `json:"notified"` // budget key -> highest threshold told
	Released map[string]bool `json:"released"` // budget key -> an admin's word lifted its action
}

func (b *budgetBooks) init() {
	b.budgets = map[string]usage.Budget{}
	b.state = budgetState{Notified: map[string]int{}, Released: map[string]bool{}}
}

// catchUp is a no-op kept for symmetry: the notified thresholds are
// stored, so nothing is told twice after a restart.
func (b *budgetBooks) catchUp(monthBooks) {}

// readBudgets reads budgets and the period's state from the settings.
func (o *Orchestrator) readBudgets(settings map[string]string) {
	if raw := settings[settingBudgets]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &o.use.budget.budgets); err != nil {
			o.log.Warn("stored budgets unreadable; no budgets", "err", err)
			o.use.budget.budgets = map[string]usage.Budget{}
		}
	}
	if raw := settings[settingBudgetState]; raw != "" {
		var st budgetState
		if err := json.Unmarshal([]byte(raw), &st); err == nil && st.Period == usage.Period(o.cfg.Now()) {
			if st.Notified == nil {
				st.Notified = map[string]int{}
			}
			if st.Released == nil {
				st.Released = map[string]bool{}
			}
			o.use.budget.state = st
		}
	}
	if o.use.budget.state.Period == "" {
		o.use.budget.state.Period = usage.Period(o.cfg.Now())
	}
}

// rollBudgets starts a new period when now is past the month's end: the
// month-to-date spend, the thresholds told and the releases start over
// (in memory; the state is stored with the next change). Write lock held.
func (o *Orchestrator) rollBudgets(now time.Time) {
	if o.use.month.start.IsZero() || now.Before(o.use.month.start.AddDate(0, 1, 0)) {
		return
	}
	o.use.month.init(now)
	o.use.budget.state = budgetState{Period: usage.Period(now), Notified: map[string]int{}, Released: map[string]bool{}}
}

// budgetAction is the budget's action, or the server's default.
func (o *Orchestrator) budgetAction(b usage.Budget) string {
	if b.Action != "" {
		return b.Action
	}
	if usage.ValidAction(o.cfg.BudgetAction) {
		return o.cfg.BudgetAction
	}
	return usage.ActionNotify
}

// liveSpend is the month's share of the attempts running now, per user
// and project: what a budget counts beside the ledger's ended attempts.
type liveSpend struct {
	user, project map[string]*usage.Spend
}

// liveSpend sums the running attempts' GPU time this month up to now (and
// its cost at today's prices), for the jobs of the users and projects
// that have a budget. Write or read lock held.
func (o *Orchestrator) liveSpend(now time.Time) *liveSpend {
	l := &liveSpend{user: map[string]*usage.Spend{}, project: map[string]*usage.Spend{}}
	if len(o.use.budget.budgets) == 0 {
		return l
	}
	for id := range o.active {
		j := o.jobs[id]
		if j == nil || j.StartedAt == nil || len(j.Allocation) == 0 {
			continue
		}
		_, u := o.use.budget.budgets[usage.BudgetUser+"/"+j.User]
		_, p := o.use.budget.budgets[usage.BudgetProject+"/"+j.Project]
		if !u && !p {
			continue
		}
		from := *j.StartedAt
		if from.Before(o.use.month.start) {
			from = o.use.month.start
		}
		if !now.After(from) {
			continue
		}
		gs := float64(len(j.Allocation)) * now.Sub(from).Seconds()
		price, _ := o.use.prices.For(o.gpuModel(j.Allocation[0].NodeID, j.Allocation[0].GPUID))
		for _, sp := range []*usage.Spend{spendOf(l.user, j.User), spendOf(l.project, j.Project)} {
			sp.GPUSeconds += gs
			sp.Dollars += gs / 3600 * price
		}
	}
	return l
}

// spendFor is the month-to-date spend the budget counts: the ledger's,
// plus the running attempts' in live (nil: none).
func (o *Orchestrator) spendFor(b usage.Budget, live *liveSpend) usage.Spend {
	m := o.use.month.user
	if b.Kind == usage.BudgetProject {
		m = o.use.month.project
	}
	var out usage.Spend
	if s := m[b.Name]; s != nil {
		out = *s
	}
	if live != nil {
		lm := live.user
		if b.Kind == usage.BudgetProject {
			lm = live.project
		}
		if s := lm[b.Name]; s != nil {
			out.GPUSeconds += s.GPUSeconds
			out.Dollars += s.Dollars
		}
	}
	return out
}

// status is the budget as GET /budgets shows it.
func (o *Orchestrator) budgetStatus(b usage.Budget, live *liveSpend) usage.BudgetStatus {
	s := o.spendFor(b, live)
	pct := b.Percent(s)
	st := o.use.budget.state
	return usage.BudgetStatus{Budget: b, EffectiveAction: o.budgetAction(b), Period: st.Period,
		UsedGPUHours: s.GPUSeconds / 3600, UsedDollars: s.Dollars, Percent: pct, Exhausted: pct >= 100,
		Released: st.Released[b.Key()], Notified: st.Notified[b.Key()]}
}

// checkBudgets tells the budgets a new ledger row touches about the
// thresholds it made them cross. From chargeUsage, write lock held.
func (o *Orchestrator) checkBudgets(tx *txn, r usage.Record) {
	o.rollBudgets(tx.now)
	for _, k := range []string{usage.BudgetUser + "/" + r.User, usage.BudgetProject + "/" + r.Project} {
		if b, ok := o.use.budget.budgets[k]; ok {
			o.evalBudget(tx, b, nil) // the attempt that ends is still among the running
		}
	}
}

// evalBudget notes a notification for each threshold the budget has
// crossed and not told yet this period, and stores that it told. Write
// lock held.
func (o *Orchestrator) evalBudget(tx *txn, b usage.Budget, live *liveSpend) {
	st := o.budgetStatus(b, live)
	told := false
	for _, th := range usage.Thresholds {
		if st.Percent < float64(th) || st.Notified >= th {
			continue
		}
		o.use.budget.state.Notified[b.Key()] = th
		told = true
		o.noteBudget(tx.now, st, th)
	}
	if told {
		o.storeBudgetState(tx)
		if st.Exhausted {
			o.log.Warn("budget exhausted", "budget", b.Key(), "action", st.EffectiveAction, "percent", st.Percent)
			o.dirty = true // a hold takes effect at the next cycle
		}
	}
}

// noteBudget notes a budget notification (kinds budget_50, budget_80,
// budget_100).
func (o *Orchestrator) noteBudget(at time.Time, st usage.BudgetStatus, th int) {
	if !o.notes.On() {
		return
	}
	kind := map[int]notify.Kind{50: notify.Budget50, 80: notify.Budget80, 100: notify.Budget100}[th]
	unit, used, limit := "gpu_hours", st.UsedGPUHours, st.GPUHours
	if st.Dollars > 0 {
		unit, used, limit = "dollars", st.UsedDollars, st.Dollars
	}
	msg := fmt.Sprintf("the %s budget of %s %s reached %d%% for %s: %.2f of %.2f %s", st.Kind, st.Kind, st.Name, th, st.Period, used, limit, strings.ReplaceAll(unit, "_", "-"))
	if th == 100 && st.EffectiveAction != usage.ActionNotify {
		msg += fmt.Sprintf("; action: %s", st.EffectiveAction)
	}
	o.notes.Note(notify.Event{Kind: kind, At: at.UTC(), Text: "Budget: " + msg,
		Budget: &notify.BudgetInfo{Kind: st.Kind, Name: st.Name, Period: st.Period, Percent: th, Used: used, Limit: limit,
			Unit: unit, Action: st.EffectiveAction, Message: msg}})
}

func (o *Orchestrator) storeBudgetState(tx *txn) {
	raw, err := json.Marshal(o.use.budget.state)
	if err != nil {
		o.log.Error("budget state not encoded", "err", err)
		return
	}
	if tx.batch.Settings == nil {
		tx.batch.Settings = map[string]string{}
	}
	tx.batch.Settings[settingBudgetState] = string(raw)
}

func (o *Orchestrator) storeBudgets(tx *txn) error {
	raw, err := json.Marshal(o.use.budget.budgets)
	if err != nil {
		return err
	}
	if tx.batch.Settings == nil {
		tx.batch.Settings = map[string]string{}
	}
	tx.batch.Settings[settingBudgets] = string(raw)
	return nil
}

// exhaustedAction is the action in force for a job's user or project: the
// first exhausted, unreleased budget's action other than notify ("" for
// none). Write lock held.
func (o *Orchestrator) exhaustedAction(user, project string, live *liveSpend) (action string, b usage.Budget) {
	for _, k := range []string{usage.BudgetUser + "/" + user, usage.BudgetProject + "/" + project} {
		bb, ok := o.use.budget.budgets[k]
		if !ok || o.use.budget.state.Released[k] {
			continue
		}
		if bb.Percent(o.spendFor(bb, live)) < 100 {
			continue
		}
		if a := o.budgetAction(bb); a != usage.ActionNotify {
			return a, bb
		}
	}
	return "", usage.Budget{}
}

// budgetSubmit makes a new job preemptible batch work at the lowest
// priority when its user's or project's budget is exhausted with action
// preemptible. From submit, write lock held.
func (o *Orchestrator) budgetSubmit(j *api.Job) {
	_, u := o.use.budget.budgets[usage.BudgetUser+"/"+j.User]
	_, p := o.use.budget.budgets[usage.BudgetProject+"/"+j.Project]
	if !u && !p {
		return
	}
	if a, b := o.exhaustedAction(j.User, j.Project, o.liveSpend(o.cfg.Now().UTC())); a == usage.ActionPreemptible {
		j.Class, j.Priority = api.ClassPreemptible, api.PriorityLow
		o.log.Info("job made preemptible by an exhausted budget", "user", j.User, "project", j.Project, "budget", b.Key())
	}
}

// budgetHolds marks the queued jobs whose user's or project's budget is
// exhausted with action hold as not eligible (reason budget_exhausted):
// data for the core. From snapshotGroups, lock held.
func (o *Orchestrator) budgetHolds(now time.Time, queue []sched.Job) {
	if len(o.use.budget.budgets) == 0 {
		return
	}
	o.rollBudgets(now)
	live := o.liveSpend(now)
	for i := range queue {
		j := &queue[i]
		if a, b := o.exhaustedAction(j.User, j.Project, live); a == usage.ActionHold {
			j.Held = usage.ReasonBudgetExhausted
			j.HeldNote = fmt.Sprintf("the %s budget of %s is exhausted for %s (action hold): it waits until next month or an admin's corral budget release %s %s",
				b.Kind, b.Name, o.use.budget.state.Period, b.Kind, b.Name)
		}
	}
}

// Budgets returns every budget with its month-to-date status, by kind
// then name.
func (o *Orchestrator) Budgets() []usage.BudgetStatus {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]usage.BudgetStatus, 0, len(o.use.budget.budgets))
	live := o.liveSpend(o.cfg.Now().UTC())
	for _, b := range o.use.budget.budgets {
		out = append(out, o.budgetStatus(b, live))
	}
	slices.SortFunc(out, func(a, b usage.BudgetStatus) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// budgetError is an invalid budget as an *api.Error naming its field.
func budgetError(err error) error {
	f := usage.Field(err)
	if f == "" {
		f = "budget"
	}
	return api.Invalid(f, "%s", strings.TrimPrefix(err.Error(), f+": "))
}

// SetBudget creates or replaces a budget, durably, and tells at once the
// thresholds its month-to-date spend already crossed.
func (o *Orchestrator) SetBudget(ctx context.Context, b usage.Budget) (usage.BudgetStatus, error) {
	if err := b.Valid(); err != nil {
		return usage.BudgetStatus{}, budgetError(err)
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		o.rollBudgets(tx.now)
		o.use.budget.budgets[b.Key()] = b
		if err := o.storeBudgets(tx); err != nil {
			return nil, err
		}
		live := o.liveSpend(tx.now)
		o.evalBudget(tx, b, live)
		o.dirty = true
		return o.budgetStatus(b, live), nil
	})
	if err != nil {
		return usage.BudgetStatus{}, err
	}
	return v.(usage.BudgetStatus), nil
}

// UnsetBudget removes a budget; 404 when there is none.
func (o *Orchestrator) UnsetBudget(ctx context.Context, kind, name string) error {
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		k := kind + "/" + name
		if _, ok := o.use.budget.budgets[k]; !ok {
			return nil, &api.Error{Status: 404, Code: "not_found", Message: fmt.Sprintf("no budget for %s %s", kind, name)}
		}
		delete(o.use.budget.budgets, k)
		delete(o.use.budget.state.Notified, k)
		delete(o.use.budget.state.Released, k)
		o.storeBudgetState(tx)
		o.dirty = true
		return nil, o.storeBudgets(tx)
	})
	return err
}

// ReleaseBudget lifts an exhausted budget's action until the next period
// (an admin's word); 404 when there is no such budget.
func (o *Orchestrator) ReleaseBudget(ctx context.Context, kind, name string) (usage.BudgetStatus, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		o.rollBudgets(tx.now)
		k := kind + "/" + name
		b, ok := o.use.budget.budgets[k]
		if !ok {
			return nil, &api.Error{Status: 404, Code: "not_found", Message: fmt.Sprintf("no budget for %s %s", kind, name)}
		}
		o.use.budget.state.Released[k] = true
		o.storeBudgetState(tx)
		o.dirty = true
		return o.budgetStatus(b, o.liveSpend(tx.now)), nil
	})
	if err != nil {
		return usage.BudgetStatus{}, err
	}
	return v.(usage.BudgetStatus), nil
}

// checkBudgetsRunning tells the thresholds that running attempts made
// budgets cross (the ledger tells those of ended ones as they end), and
// starts a new period at the month's turn. Each tick; loop only.
func (o *Orchestrator) checkBudgetsRunning(ctx context.Context) {
	o.mu.Lock()
	if len(o.use.budget.budgets) == 0 {
		o.mu.Unlock()
		return
	}
	tx := o.begin()
	o.rollBudgets(tx.now)
	live := o.liveSpend(tx.now)
	for _, b := range o.use.budget.budgets {
		o.evalBudget(tx, b, live)
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("budget notifications not committed", "err", err)
	}
}
