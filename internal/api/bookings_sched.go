package api

// ReasonReservationEnded is the reason of a job stopped because its
// booking's window ended (the booking was not flex): it was given the
// time-limit treatment (SIGTERM, the cancel grace, SIGKILL) and ends
// failed (docs/bookings-scheduling.md).
const ReasonReservationEnded = "reservation_ended"
