package orchestrator

import "github.com/corral-sched/corral/internal/api"

// chargeIdleBooking is called, in the transaction that closes it, for each
// window of a booking that ends or is released (bookings_tick.go), with the
// GPU-seconds booked but left idle in it: the booked GPUs times the time
// the window lasted, less the GPU time jobs of the booking used in it. r
// is the booking as closed (its IdleGPUSeconds already include them); its
// Owner is who is charged. It records nothing beyond the booking's record
// for now: the usage ledger (issue 14, Deliver 2) is wired here at the
// merge, to charge the owner's and the project's usage in the same tx.
func (tx *txn) chargeIdleBooking(r *api.Reservation, gpuSeconds float64) {
	_ = r
	_ = gpuSeconds
}
