package api

// ReasonReservationEnded is the reason of a job stopped because its
// booking's window ended (the booking was not flex): it was given the
// time-limit treatment (SIGTERM, the cancel grace, SIGKILL) and ends
// failed (docs/bookings-scheduling.md).
const ReasonReservationEnded = "reservation_ended"

// Why-pending reasons that were one, "reservation", until they were told
// apart. A job's pending_cause says which; its pending_reason still says
// "reservation" for both, as clients written before the split read it
// (PendingReasonOf).
const (
	// ReasonBackfillReserved: the job would fit now on GPUs held for the
	// head job's reservation (backfill) and could delay it.
	ReasonBackfillReserved = "backfill_reserved"
	// ReasonBooking: a booking keeps the job out: it waits for the window
	// of the booking it named, may not use that booking, or would fit now
	// but for a booking's GPUs.
	ReasonBooking = "booking"
	// ReasonReservation is what pending_reason says for either.
	ReasonReservation = "reservation"
)

// PendingReasonOf returns the pending_reason of a job whose precise
// reason (pending_cause) is cause: cause itself, but "reservation" for
// the reasons split out of it.
func PendingReasonOf(cause string) string {
	switch cause {
	case ReasonBackfillReserved, ReasonBooking:
		return ReasonReservation
	}
	return cause
}
