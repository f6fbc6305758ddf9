package spend

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
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

// readBudgets reads budgets and the period's state from the settings.
// The notified thresholds are stored, so nothing is told twice after a
// restart.
func (b *Books) readBudgets(settings map[string]string) {
	if raw := settings[settingBudgets]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &b.budget.budgets); err != nil {
			b.log.Warn("stored budgets unreadable; no budgets", "err", err)
			b.budget.budgets = map[string]usage.Budget{}
		}
	}
	if raw := settings[settingBudgetState]; raw != "" {
		var st budgetState
		if err := json.Unmarshal([]byte(raw), &st); err == nil && st.Period == usage.Period(b.cfg.Now()) {
			if st.Notified == nil {
				st.Notified = map[string]int{}
			}
			if st.Released == nil {
				st.Released = map[string]bool{}
			}
			b.budget.state = st
		}
	}
	if b.budget.state.Period == "" {
		b.budget.state.Period = usage.Period(b.cfg.Now())
	}
}

// roll starts a new period when now is past the month's end: the
// month-to-date spend, the thresholds told and the releases start over
// (in memory; the state is stored with the next change).
func (b *Books) roll(now time.Time) {
	if b.month.start.IsZero() || now.Before(b.month.start.AddDate(0, 1, 0)) {
		return
	}
	b.month.init(now)
	b.budget.state = budgetState{Period: usage.Period(now), Notified: map[string]int{}, Released: map[string]bool{}}
}

// action is the budget's action, or the server's default.
func (b *Books) action(bg usage.Budget) string {
	if bg.Action != "" {
		return bg.Action
	}
	if usage.ValidAction(b.cfg.BudgetAction) {
		return b.cfg.BudgetAction
	}
	return usage.ActionNotify
}

// budgeted reports whether the user or the project has a budget.
func (b *Books) budgeted(user, project string) bool {
	_, u := b.budget.budgets[usage.BudgetUser+"/"+user]
	_, p := b.budget.budgets[usage.BudgetProject+"/"+project]
	return u || p
}

// liveSpend is the month's share of the attempts running now, per user
// and project: what a budget counts beside the ledger's ended attempts.
type liveSpend struct {
	user, project map[string]*usage.Spend
}

// liveSpend sums the running attempts' GPU time this month up to now (and
// its cost at today's prices), for the jobs of the users and projects
// that have a budget.
func (b *Books) liveSpend(now time.Time) *liveSpend {
	l := &liveSpend{user: map[string]*usage.Spend{}, project: map[string]*usage.Spend{}}
	if len(b.budget.budgets) == 0 {
		return l
	}
	for j := range b.cluster.Active() {
		if j.StartedAt == nil || len(j.Allocation) == 0 || !b.budgeted(j.User, j.Project) {
			continue
		}
		from := *j.StartedAt
		if from.Before(b.month.start) {
			from = b.month.start
		}
		if !now.After(from) {
			continue
		}
		gs := allocEquivalents(j.Allocation) * now.Sub(from).Seconds()
		price, _ := b.prices.For(b.cluster.GPUModel(j.Allocation[0].NodeID, j.Allocation[0].GPUID))
		for _, sp := range []*usage.Spend{spendOf(l.user, j.User), spendOf(l.project, j.Project)} {
			sp.GPUSeconds += gs
			sp.Dollars += gs / 3600 * price
		}
	}
	return l
}

// spendFor is the month-to-date spend the budget counts: the ledger's,
// plus the running attempts' in live (nil: none).
func (b *Books) spendFor(bg usage.Budget, live *liveSpend) usage.Spend {
	m := b.month.user
	if bg.Kind == usage.BudgetProject {
		m = b.month.project
	}
	var out usage.Spend
	if s := m[bg.Name]; s != nil {
		out = *s
	}
	if live != nil {
		lm := live.user
		if bg.Kind == usage.BudgetProject {
			lm = live.project
		}
		if s := lm[bg.Name]; s != nil {
			out.GPUSeconds += s.GPUSeconds
			out.Dollars += s.Dollars
		}
	}
	return out
}

// status is the budget as GET /budgets shows it.
func (b *Books) status(bg usage.Budget, live *liveSpend) usage.BudgetStatus {
	s := b.spendFor(bg, live)
	pct := bg.Percent(s)
	st := b.budget.state
	return usage.BudgetStatus{Budget: bg, EffectiveAction: b.action(bg), Period: st.Period,
		UsedGPUHours: s.GPUSeconds / 3600, UsedDollars: s.Dollars, Percent: pct, Exhausted: pct >= 100,
		Released: st.Released[bg.Key()], Notified: st.Notified[bg.Key()]}
}

// checkBudgets tells the budgets a new ledger row touches about the
// thresholds it made them cross. From Charge.
func (b *Books) checkBudgets(tx feature.Tx, r usage.Record) {
	b.roll(tx.Now())
	for _, k := range []string{usage.BudgetUser + "/" + r.User, usage.BudgetProject + "/" + r.Project} {
		if bg, ok := b.budget.budgets[k]; ok {
			b.eval(tx, bg, nil) // the attempt that ends is still among the running
		}
	}
}

// eval notes a notification for each threshold the budget has crossed and
// not told yet this period, and stores that it told.
func (b *Books) eval(tx feature.Tx, bg usage.Budget, live *liveSpend) {
	st := b.status(bg, live)
	told := false
	for _, th := range usage.Thresholds {
		if st.Percent < float64(th) || st.Notified >= th {
			continue
		}
		b.budget.state.Notified[bg.Key()] = th
		told = true
		b.note(tx.Now(), st, th)
	}
	if told {
		b.storeState(tx)
		if st.Exhausted {
			b.log.Warn("budget exhausted", "budget", bg.Key(), "action", st.EffectiveAction, "percent", st.Percent)
			b.cluster.Reschedule() // a hold takes effect at the next cycle
		}
	}
}

// note notes a budget notification (kinds budget_50, budget_80,
// budget_100).
func (b *Books) note(at time.Time, st usage.BudgetStatus, th int) {
	if b.cfg.Notes == nil || !b.cfg.Notes.On() {
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
	b.cfg.Notes.Note(notify.Event{Kind: kind, At: at.UTC(), Text: "Budget: " + msg,
		Budget: &notify.BudgetInfo{Kind: st.Kind, Name: st.Name, Period: st.Period, Percent: th, Used: used, Limit: limit,
			Unit: unit, Action: st.EffectiveAction, Message: msg}})
}

func (b *Books) storeState(tx feature.Tx) {
	raw, err := json.Marshal(b.budget.state)
	if err != nil {
		b.log.Error("budget state not encoded", "err", err)
		return
	}
	setting(tx, settingBudgetState, string(raw))
}

func (b *Books) storeBudgets(tx feature.Tx) error {
	raw, err := json.Marshal(b.budget.budgets)
	if err != nil {
		return err
	}
	setting(tx, settingBudgets, string(raw))
	return nil
}

// exhaustedAction is the action in force for a job's user or project: the
// first exhausted, unreleased budget's action other than notify ("" for
// none).
func (b *Books) exhaustedAction(user, project string, live *liveSpend) (action string, bg usage.Budget) {
	for _, k := range []string{usage.BudgetUser + "/" + user, usage.BudgetProject + "/" + project} {
		bb, ok := b.budget.budgets[k]
		if !ok || b.budget.state.Released[k] {
			continue
		}
		if bb.Percent(b.spendFor(bb, live)) < 100 {
			continue
		}
		if a := b.action(bb); a != usage.ActionNotify {
			return a, bb
		}
	}
	return "", usage.Budget{}
}

// CheckSubmit makes a new job preemptible batch work at the lowest
// priority when its user's or project's budget is exhausted with action
// preemptible (feature.SubmitCheck). It never refuses: action hold holds
// the job in the queue (GateQueue).
func (b *Books) CheckSubmit(s *feature.Submission) error {
	j := s.Job
	if !b.budgeted(j.User, j.Project) {
		return nil
	}
	if a, bg := b.exhaustedAction(j.User, j.Project, b.liveSpend(b.cfg.Now().UTC())); a == usage.ActionPreemptible {
		j.Class, j.Priority = api.ClassPreemptible, api.PriorityLow
		b.log.Info("job made preemptible by an exhausted budget", "user", j.User, "project", j.Project, "budget", bg.Key())
	}
	return nil
}

// GateQueue marks the queued jobs whose user's or project's budget is
// exhausted with action hold as not eligible (reason budget_exhausted):
// data for the core (feature.QueueGate).
func (b *Books) GateQueue(queue []sched.Job, now time.Time) {
	if len(b.budget.budgets) == 0 {
		return
	}
	b.roll(now)
	live := b.liveSpend(now)
	for i := range queue {
		j := &queue[i]
		if a, bg := b.exhaustedAction(j.User, j.Project, live); a == usage.ActionHold {
			j.Held = usage.ReasonBudgetExhausted
			j.HeldNote = fmt.Sprintf("the %s budget of %s is exhausted for %s (action hold): it waits until next month or an admin's corral budget release %s %s",
				bg.Kind, bg.Name, b.budget.state.Period, bg.Kind, bg.Name)
		}
	}
}

// Budgets returns every budget with its month-to-date status, by kind
// then name. Read lock held.
func (b *Books) Budgets() []usage.BudgetStatus {
	out := make([]usage.BudgetStatus, 0, len(b.budget.budgets))
	live := b.liveSpend(b.cfg.Now().UTC())
	for _, bg := range b.budget.budgets {
		out = append(out, b.status(bg, live))
	}
	slices.SortFunc(out, func(a, b usage.BudgetStatus) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// CheckBudget checks a budget to set: an invalid one is an *api.Error
// naming its field.
func CheckBudget(bg usage.Budget) error {
	err := bg.Valid()
	if err == nil {
		return nil
	}
	f := usage.Field(err)
	if f == "" {
		f = "budget"
	}
	return api.Invalid(f, "%s", strings.TrimPrefix(err.Error(), f+": "))
}

// SetBudget creates or replaces a budget (checked by CheckBudget), in tx,
// and tells at once the thresholds its month-to-date spend already
// crossed.
func (b *Books) SetBudget(tx feature.Tx, bg usage.Budget) (usage.BudgetStatus, error) {
	b.roll(tx.Now())
	b.budget.budgets[bg.Key()] = bg
	if err := b.storeBudgets(tx); err != nil {
		return usage.BudgetStatus{}, err
	}
	live := b.liveSpend(tx.Now())
	b.eval(tx, bg, live)
	b.cluster.Reschedule()
	return b.status(bg, live), nil
}

// notFound is the answer about a budget there is none of.
func notFound(kind, name string) error {
	return &api.Error{Status: 404, Code: "not_found", Message: fmt.Sprintf("no budget for %s %s", kind, name)}
}

// UnsetBudget removes a budget, in tx; 404 when there is none.
func (b *Books) UnsetBudget(tx feature.Tx, kind, name string) error {
	k := kind + "/" + name
	if _, ok := b.budget.budgets[k]; !ok {
		return notFound(kind, name)
	}
	delete(b.budget.budgets, k)
	delete(b.budget.state.Notified, k)
	delete(b.budget.state.Released, k)
	b.storeState(tx)
	b.cluster.Reschedule()
	return b.storeBudgets(tx)
}

// ReleaseBudget lifts an exhausted budget's action until the next period
// (an admin's word), in tx; 404 when there is no such budget.
func (b *Books) ReleaseBudget(tx feature.Tx, kind, name string) (usage.BudgetStatus, error) {
	b.roll(tx.Now())
	k := kind + "/" + name
	bg, ok := b.budget.budgets[k]
	if !ok {
		return usage.BudgetStatus{}, notFound(kind, name)
	}
	b.budget.state.Released[k] = true
	b.storeState(tx)
	b.cluster.Reschedule()
	return b.status(bg, b.liveSpend(tx.Now())), nil
}

// HasBudgets reports whether any budget is set: CheckRunning has work.
func (b *Books) HasBudgets() bool { return len(b.budget.budgets) > 0 }

// CheckRunning tells, in tx, the thresholds that running attempts made
// budgets cross (the ledger tells those of ended ones as they end), and
// starts a new period at the month's turn. Each tick.
func (b *Books) CheckRunning(tx feature.Tx) {
	b.roll(tx.Now())
	live := b.liveSpend(tx.Now())
	for _, bg := range b.budget.budgets {
		b.eval(tx, bg, live)
	}
}

// allocEquivalents is an allocation in GPU-equivalents: 1 per whole GPU,
// a MIG slice's or MPS share's part of its GPU.
func allocEquivalents(as []api.Allocation) float64 {
	e := 0.0
	for i := range as {
		e += as[i].Equivalents()
	}
	return e
}
