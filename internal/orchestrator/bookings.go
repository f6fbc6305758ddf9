package orchestrator

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// reservationList returns every booking that has not ended by now, with
// the occurrences of repeating bookings expanded over the planning horizon
// (each occurrence its own Reservation with its own Start and End). The
// scheduling cycle turns them into blocked intervals. The caller holds
// o.mu (or is the loop).
func (o *Orchestrator) reservationList(now time.Time) []*api.Reservation {
	var out []*api.Reservation
	for _, r := range o.resv {
		if r.End.After(now) && r.State != "released" && r.State != "ended" {
			out = append(out, r)
		}
	}
	return out
}
