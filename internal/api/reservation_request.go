package api

// Booking states (Reservation.State).
const (
	BookingScheduled = "scheduled"
	BookingActive    = "active"
	BookingReleased  = "released"
	BookingEnded     = "ended"
)

// ReservationRequest creates a booking (POST /reservations) or changes one
// (PATCH /reservations/{name}: only the fields given change; name is not
// given). Start and End are RFC 3339 times; Duration (a Go duration such
// as "8h", or seconds) stands for End as Start + Duration. Users empty:
// the caller.
type ReservationRequest struct {
	Name     string    `json:"name,omitempty"`
	GPUs     *int      `json:"gpus,omitempty"`
	Nodes    *[]string `json:"nodes,omitempty"`
	GPUType  *string   `json:"gpu_type,omitempty"`
	Start    *string   `json:"start,omitempty"`
	End      *string   `json:"end,omitempty"`
	Duration RawValue  `json:"duration,omitempty"`
	Users    *[]string `json:"users,omitempty"`
	Project  *string   `json:"project,omitempty"`
	Flags    *[]string `json:"flags,omitempty"`
}

// ReservationList is GET /reservations.
type ReservationList struct {
	Reservations []Reservation `json:"reservations"`
}
