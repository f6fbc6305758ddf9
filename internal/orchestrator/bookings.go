package orchestrator

import (
	"context"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/sched"
)

// Bookings are a feature of their own (feature/bookings): their books,
// rules, tick, share of the snapshot and the API's operations
// (bookings.Ops). What stays here is the expiry of a booking's window in
// the cycle (the loop stops its jobs), and bookingCluster, the books the
// feature reads.

// Booker is who creates or changes a booking.
type Booker = bookings.Booker

// DefaultBookingAllowance is the weekly allowance of a user's booked
// GPU-hours that `corral server` and `corral up` give by default
// (--booking-allowance).
const DefaultBookingAllowance = bookings.DefaultAllowance

// DefaultPurgeAfter is how long after its start an unused booking is
// released (--purge-after).
const DefaultPurgeAfter = bookings.DefaultPurgeAfter

// The API's operations on bookings are package bookings' (bookings.Ops):
// each method below is its delegate.

func (o *Orchestrator) bookingOps() bookings.Ops {
	return bookings.Ops{Books: o.bookings, Loop: loop{o}}
}

// Bookings returns every booking (released and ended ones too), by
// start then name.
func (o *Orchestrator) Bookings() []api.Reservation { return o.bookingOps().List() }

// Booking returns the booking named name.
func (o *Orchestrator) Booking(name string) (api.Reservation, error) { return o.bookingOps().Get(name) }

// CreateBooking checks and makes a booking for who, committed before it
// is answered.
func (o *Orchestrator) CreateBooking(ctx context.Context, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	return o.bookingOps().Create(ctx, req, who)
}

// UpdateBooking changes the fields req gives of a live booking.
func (o *Orchestrator) UpdateBooking(ctx context.Context, name string, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	return o.bookingOps().Update(ctx, name, req, who)
}

// DeleteBooking cancels a booking and returns it as it was left.
func (o *Orchestrator) DeleteBooking(ctx context.Context, name string, who Booker) (api.Reservation, error) {
	return o.bookingOps().Delete(ctx, name, who)
}

// expire gives the jobs whose booking's window ended the time-limit
// treatment (bookings.Books.Expire). Write lock held.
func (o *Orchestrator) expire(ctx context.Context, tx *txn, es []sched.Expiry) {
	if len(es) == 0 {
		return // most cycles expire nothing, and running as an interface costs an allocation
	}
	o.bookings.Expire(tx, es, running{o, ctx}, o.notes, o.cfg.CancelGrace)
}

// bookingCluster is what feature/bookings reads of the books
// (bookings.Cluster). Called with the lock held.
type bookingCluster struct{ o *Orchestrator }

func (c bookingCluster) Job(id string) *api.Job            { return c.o.jobs[id] }
func (c bookingCluster) Lookup(id string) (*api.Job, bool) { return c.o.lookup(id) }
func (c bookingCluster) Active(id string) bool             { return c.o.active[id] }
func (c bookingCluster) ActiveIDs() iter.Seq[string]       { return maps.Keys(c.o.active) }
func (c bookingCluster) PreemptGrace() time.Duration       { return c.o.policy.PreemptGrace.Duration() }
func (c bookingCluster) Replan()                           { c.o.dirty = true }
func (c bookingCluster) HasNode(id string) bool            { return c.o.nodes.Has(id) }
func (c bookingCluster) ChargeIdle(tx feature.Tx, r *api.Reservation, gpuSeconds float64) {
	c.o.spend.ChargeBookingIdle(tx, r, gpuSeconds) // feature/spend: once per occurrence
}

func (c bookingCluster) NodeCount() int { return c.o.nodes.Len() }

func (c bookingCluster) NodeAt(i int) bookings.Node {
	n := c.o.nodes.At(i)
	return bookings.Node{ID: n.ID, Down: n.IsDown(), Devices: n.Devices}
}

func (c bookingCluster) SortedActiveIDs() []string {
	ids := make([]string, 0, len(c.o.active))
	for id := range c.o.active {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
