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
// rules, tick and share of the snapshot. What stays here is what takes
// the lock, makes a transaction or calls the executor: the API's
// operations through the loop, the tick's commit, and stopping the jobs
// of a booking whose window ended; and bookingCluster, the books the
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

// Bookings returns every booking (released and ended ones too), by
// start then name.
func (o *Orchestrator) Bookings() []api.Reservation {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.bookings.List()
}

// Booking returns the booking named name.
func (o *Orchestrator) Booking(name string) (api.Reservation, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.bookings.Get(name)
}

// CreateBooking checks and makes a booking for who, committed before it
// is answered (bookings.Books.Create).
func (o *Orchestrator) CreateBooking(ctx context.Context, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	if err := bookings.CheckCreate(&req); err != nil {
		return api.Reservation{}, err
	}
	return o.doBooking(ctx, func(tx *txn) (api.Reservation, error) { return o.bookings.Create(tx, req, who) })
}

// UpdateBooking changes the fields req gives of a live booking,
// committed before it is answered (bookings.Books.Update).
func (o *Orchestrator) UpdateBooking(ctx context.Context, name string, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	if err := bookings.CheckUpdate(name, &req); err != nil {
		return api.Reservation{}, err
	}
	return o.doBooking(ctx, func(tx *txn) (api.Reservation, error) { return o.bookings.Update(tx, name, req, who) })
}

// DeleteBooking cancels a booking, committed before it is answered
// (bookings.Books.Delete). It returns the booking as it was left.
func (o *Orchestrator) DeleteBooking(ctx context.Context, name string, who Booker) (api.Reservation, error) {
	return o.doBooking(ctx, func(tx *txn) (api.Reservation, error) { return o.bookings.Delete(tx, name, who) })
}

// doBooking runs fn through the loop and returns its booking once
// committed.
func (o *Orchestrator) doBooking(ctx context.Context, fn func(tx *txn) (api.Reservation, error)) (api.Reservation, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		r, err := fn(tx)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	if err != nil {
		return api.Reservation{}, err
	}
	return v.(api.Reservation), nil
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
	ownTxn(tx).chargeBookingIdle(r, gpuSeconds) // usage.go
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
