package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/sched"
)

// Bookings are a feature of their own (feature/bookings): their books,
// rules, tick, share of the snapshot and the API's operations
// (bookings.Ops, through FeatureOps.Bookings). What stays here is the expiry of a booking's window in
// the cycle (the loop stops its jobs), and bookingCluster, the books the
// feature reads.

// DefaultBookingAllowance is the weekly allowance of a user's booked
// GPU-hours that `corral server` and `corral up` give by default
// (--booking-allowance).
const DefaultBookingAllowance = bookings.DefaultAllowance

// DefaultPurgeAfter is how long after its start an unused booking is
// released (--purge-after).
const DefaultPurgeAfter = bookings.DefaultPurgeAfter

// expire gives the jobs whose booking's window ended the time-limit
// treatment (bookings.Books.Expire). Write lock held.
func (o *Orchestrator) expire(ctx context.Context, tx *txn, es []sched.Expiry) {
	if len(es) == 0 {
		return // most cycles expire nothing, and running as an interface costs an allocation
	}
	o.bookings.Expire(tx, es, running{o.jobs, o, ctx}, o.notes, o.cfg.CancelGrace)
}

// bookingCluster is what feature/bookings reads of the books
// (bookings.Cluster): the books themselves (the job books' Get, IsActive,
// ActiveIDs, SortedActiveIDs; the GPU books' Nodes), and the policy, the
// ended jobs, the loop. Called with the lock held.
type bookingCluster struct {
	*jobbook.Book
	*gpuBooks
	o *Orchestrator
}

func (c bookingCluster) Lookup(id string) (*api.Job, bool) { return c.o.found().Lookup(id) }
func (c bookingCluster) PreemptGrace() time.Duration       { return c.o.policy.PreemptGrace.Duration() }
func (c bookingCluster) Replan()                           { c.o.dirty = true }
func (c bookingCluster) ChargeIdle(tx feature.Tx, r *api.Reservation, gpuSeconds float64) {
	c.o.spend.ChargeBookingIdle(tx, r, gpuSeconds) // feature/spend: once per occurrence
}
