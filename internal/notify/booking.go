package notify

import "slices"

// ReservationReleased is told to a booking's booker and users when the
// booking is released unused (its --purge-after passed with no job of it
// run in its window; docs/bookings.md).
const ReservationReleased Kind = "reservation.released"

// BookingInfo is what a message says about a booking. Users are the
// people told (its booker first); Text of the Event is the sentence.
type BookingInfo struct {
	Name           string   `json:"name"`
	Owner          string   `json:"owner"`
	Users          []string `json:"users"`
	Project        string   `json:"project,omitempty"`
	GPUs           int      `json:"gpus"`
	IdleGPUSeconds float64  `json:"idle_gpu_seconds"`
}

// bookingRoute returns the endpoints of everyone a booking event is for:
// its booker's and users' own, and its project's, each once.
func (p *Planner) bookingRoute(b *BookingInfo) []string {
	var eps []string
	for _, u := range append([]string{b.Owner}, b.Users...) {
		for _, id := range p.reg.route(u, b.Project, false) {
			if !slices.Contains(eps, id) {
				eps = append(eps, id)
			}
		}
	}
	return eps
}
