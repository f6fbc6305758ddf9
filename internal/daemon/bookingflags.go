package daemon

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// bookingFlags are the bookings' flags of `corral server` and `corral up`
// (docs/bookings.md).
type bookingFlags struct {
	allowance  float64
	purgeAfter time.Duration
}

func (f *bookingFlags) register(fl *pflag.FlagSet) {
	fl.Float64Var(&f.allowance, "booking-allowance", orchestrator.DefaultBookingAllowance,
		"GPU-hours each user may book per ISO week (corral reserve; admins are not bounded); 0: only admins book")
	cmdkit.DurationVar(fl, &f.purgeAfter, "purge-after", orchestrator.DefaultPurgeAfter,
		"how long after its start a booking no job has used is released (and its booker told); 0: never")
}

// apply puts the flags in the orchestrator's configuration.
func (f *bookingFlags) apply(cfg *orchestrator.Config) error {
	if f.allowance < 0 {
		return fmt.Errorf("--booking-allowance: %v is negative; give GPU-hours per user per week, or 0", f.allowance)
	}
	if f.purgeAfter < 0 {
		return fmt.Errorf("--purge-after: %v is negative; give a duration, or 0 for never", f.purgeAfter)
	}
	cfg.BookingAllowance = f.allowance
	if f.allowance == 0 {
		cfg.BookingAllowance = -1 // the orchestrator's 0 is its default; the flag's 0 is admins only
	}
	cfg.PurgeAfter = f.purgeAfter
	if f.purgeAfter == 0 {
		cfg.PurgeAfter = -1 // the orchestrator's 0 is its default; the flag's 0 is never
	}
	return nil
}
