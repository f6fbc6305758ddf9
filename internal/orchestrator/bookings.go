package orchestrator

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// bookingList returns every booking that has not ended by now, with
// the occurrences of repeating bookings expanded over the planning horizon
// (each occurrence its own Reservation with its own Start and End). The
// scheduling cycle turns them into blocked intervals. The caller holds
// o.mu (or is the loop).
func (o *Orchestrator) bookingList(now time.Time) []*api.Reservation {
	var out []*api.Reservation
	for _, r := range o.bookings {
		if !live(r) || !r.End.After(now) {
			continue
		}
		if bookingPeriod(r) == 0 {
			out = append(out, r) // one window: no expansion to allocate
			continue
		}
		for i, w := range occurrences(r, now.Add(bookingHorizon)) {
			if !w.end.After(now) {
				continue
			}
			if i == 0 {
				out = append(out, r)
				continue
			}
			c := cloneBooking(r)
			c.Start, c.End, c.Occurrence = w.start, w.end, r.Occurrence+i
			c.State, c.UsedAt, c.UsedGPUSeconds = api.BookingScheduled, nil, 0
			out = append(out, &c)
		}
	}
	return out
}
