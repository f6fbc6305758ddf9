package notify

// Budget kinds: a budget of a user or project reached 50%, 80%
// or 100% of its month; each is sent once per period and budget, to the
// budget's owner's endpoints (the user's, or the project's) and to the
// cluster's.
const (
	Budget50  Kind = "budget_50"
	Budget80  Kind = "budget_80"
	Budget100 Kind = "budget_100"
)

// BudgetInfo is what a budget notification says.
type BudgetInfo struct {
	Kind    string  `json:"kind"` // "user" or "project"
	Name    string  `json:"name"`
	Period  string  `json:"period"` // the calendar month, "2026-11"
	Percent int     `json:"percent"`
	Used    float64 `json:"used"`  // in the budget's unit
	Limit   float64 `json:"limit"` // in the budget's unit
	Unit    string  `json:"unit"`  // "gpu_hours" or "dollars"
	Action  string  `json:"action"`
	Message string  `json:"message"`
}

// budgetRoute is the endpoints of a budget's event: its owner's and the
// cluster's.
func (p *Planner) budgetRoute(b *BudgetInfo) []string {
	var eps []string
	if b.Kind == "user" {
		eps = p.reg.route(b.Name, "", false)
	} else {
		eps = p.reg.route("", b.Name, false)
	}
	return append(eps, p.reg.route("", "", true)...)
}
