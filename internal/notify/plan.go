package notify

import (
	"encoding/json"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// Planner turns events into outbox rows: one per endpoint that wants the
// event. It is pure routing over the registry's memory (no I/O), so the
// orchestrator calls it inside its commit, with its lock held.
type Planner struct {
	reg  *Registry
	wake func()
}

// NewPlanner routes through reg; wake (may be nil) is called by Kick.
func NewPlanner(reg *Registry, wake func()) *Planner {
	return &Planner{reg: reg, wake: wake}
}

// Plan returns the outbox rows of evs. A job's event goes to its user's
// and its project's endpoints when the job wants it (Wants, by the job's
// own notify field, else its user's own defaults, else the built-in
// defaults; an array task's only when taskWanted); an array's summary
// likewise; an alert to the cluster's endpoints.
func (p *Planner) Plan(evs []Event) []store.OutboxItem {
	var out []store.OutboxItem
	for _, ev := range evs {
		var eps []string
		switch {
		case ev.Job != nil:
			j := ev.Job
			if j.ArrayJobID != "" && !taskWanted(j, ev.Kind) {
				continue
			}
			if !Wants(p.reg.effective(j.User, j.notify), ev.Kind, time.Duration(j.RuntimeSeconds*float64(time.Second))) {
				continue
			}
			eps = p.reg.route(j.User, j.Project, false)
		case ev.Array != nil:
			if !Wants(p.reg.effective(ev.Array.User, ev.Array.notify), ArrayFinished, 0) {
				continue
			}
			eps = p.reg.route(ev.Array.User, ev.Array.Project, false)
		case ev.Alert != nil:
			eps = p.reg.route("", "", true)
		case ev.Booking != nil:
			eps = p.bookingRoute(ev.Booking) // booking.go
		case ev.Budget != nil:
			eps = p.budgetRoute(ev.Budget) // budget.go
		}
		if len(eps) == 0 {
			continue
		}
		data, err := json.Marshal(ev)
		if err != nil {
			continue // an Event always marshals
		}
		for _, id := range eps {
			out = append(out, store.OutboxItem{EndpointID: id, Kind: string(ev.Kind), CreatedAt: ev.At.UTC(),
				NextAt: ev.At.UTC(), State: store.OutboxPending, Data: string(data)})
		}
	}
	return out
}

// Kick tells the sender that rows were committed.
func (p *Planner) Kick() {
	if p.wake != nil {
		p.wake()
	}
}
