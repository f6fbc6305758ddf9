package orchestrator

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Bookings through the loop (docs/bookings.md): each change is checked
// against the rules (bookings_rules.go) and committed with its record
// before it is answered.

// Bookings returns every booking (released and ended ones too), by
// start then name.
func (o *Orchestrator) Bookings() []api.Reservation {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]api.Reservation, 0, len(o.bookings))
	for _, r := range o.bookings {
		out = append(out, cloneBooking(r))
	}
	slices.SortFunc(out, func(a, b api.Reservation) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Booking returns the booking named name.
func (o *Orchestrator) Booking(name string) (api.Reservation, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	r, ok := o.bookings[name]
	if !ok {
		return api.Reservation{}, api.NotFound("no booking %q", name)
	}
	return cloneBooking(r), nil
}

// CreateBooking checks and makes a booking for who: its owner is
// who; its users default to who. A name in use by a live booking is a
// 409; one of a released or ended booking is taken over.
func (o *Orchestrator) CreateBooking(ctx context.Context, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	req.Name = strings.TrimSpace(req.Name)
	if !bookingName.MatchString(req.Name) {
		return api.Reservation{}, api.Invalid("name", "%q is not a booking name: letters, digits, '.', '_' and '-', at most 63, starting with a letter or digit", req.Name)
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		if old, ok := o.bookings[req.Name]; ok && live(old) {
			return nil, api.Conflict("reservation_exists", "a booking named %q exists (%s); pick another name or change it with PATCH", req.Name, old.State)
		}
		r := &api.Reservation{Name: req.Name, Owner: who.User, CreatedAt: tx.now, State: api.BookingScheduled}
		if err := applyBookingRequest(r, &req, true, tx.now); err != nil {
			return nil, err
		}
		if len(r.Users) == 0 {
			r.Users = []string{who.User}
		}
		if err := o.admitBooking(r, who); err != nil {
			return nil, err
		}
		if !r.Start.After(tx.now) {
			r.State = api.BookingActive
		}
		o.bookings[r.Name] = r
		o.saveBooking(tx, r)
		o.log.Info("booking created", "booking", r.Name, "owner", r.Owner, "gpus", r.GPUs, "start", r.Start, "end", r.End)
		return cloneBooking(r), nil
	})
	if err != nil {
		return api.Reservation{}, err
	}
	return v.(api.Reservation), nil
}

// UpdateBooking changes the fields req gives of a live booking (its
// owner's or, for admins, anyone's), checked as a new one would be; its
// GPUs stay where they still fit.
func (o *Orchestrator) UpdateBooking(ctx context.Context, name string, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	if req.Name != "" && req.Name != name {
		return api.Reservation{}, api.Invalid("name", "a booking cannot be renamed")
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		old, err := o.ownBooking(name, who)
		if err != nil {
			return nil, err
		}
		if !live(old) {
			return nil, api.Conflict("reservation_over", "booking %q is %s; it can no longer change", name, old.State)
		}
		r := new(cloneBooking(old))
		if err := applyBookingRequest(r, &req, false, tx.now); err != nil {
			return nil, err
		}
		if len(r.Users) == 0 {
			r.Users = []string{r.Owner}
		}
		if err := o.admitBooking(r, who); err != nil {
			return nil, err
		}
		if r.State == api.BookingScheduled && !r.Start.After(tx.now) {
			r.State = api.BookingActive
		} else if r.State == api.BookingActive && r.Start.After(tx.now) {
			r.State = api.BookingScheduled
		}
		o.bookings[name] = r
		o.saveBooking(tx, r)
		o.log.Info("booking changed", "booking", name, "by", who.User)
		return cloneBooking(r), nil
	})
	if err != nil {
		return api.Reservation{}, err
	}
	return v.(api.Reservation), nil
}

// DeleteBooking cancels a booking: one whose window has not begun is
// forgotten; one in its window is released, its idle GPU time so far
// charged to its booker (bookings_tick.go). It returns the booking as it
// was left.
func (o *Orchestrator) DeleteBooking(ctx context.Context, name string, who Booker) (api.Reservation, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		r, err := o.ownBooking(name, who)
		if err != nil {
			return nil, err
		}
		if live(r) && !r.Start.After(tx.now) {
			o.closeBooking(tx, r, api.BookingReleased, tx.now, false)
			return cloneBooking(r), nil
		}
		delete(o.bookings, name)
		delete(o.bookLive, name)
		tx.batch.DeleteBookings = append(tx.batch.DeleteBookings, name)
		o.dirty = true
		o.log.Info("booking deleted", "booking", name, "by", who.User)
		return cloneBooking(r), nil
	})
	if err != nil {
		return api.Reservation{}, err
	}
	return v.(api.Reservation), nil
}

// ownBooking returns the booking named name if who may change it: its
// owner or an admin. Loop only.
func (o *Orchestrator) ownBooking(name string, who Booker) (*api.Reservation, error) {
	r, ok := o.bookings[name]
	if !ok {
		return nil, api.NotFound("no booking %q", name)
	}
	if !who.Admin && r.Owner != who.User {
		return nil, &api.Error{Status: http.StatusForbidden, Code: "forbidden",
			Message: "booking " + name + " is " + r.Owner + "'s; only its booker or an admin may change it"}
	}
	return r, nil
}

// admitBooking checks who may make r, the allowance, and chooses its
// GPUs. Loop only.
func (o *Orchestrator) admitBooking(r *api.Reservation, who Booker) error {
	if err := checkBooker(r, who); err != nil {
		return err
	}
	if err := o.checkAllowance(r, who); err != nil {
		return err
	}
	a, err := o.allocateBooking(r)
	if err != nil {
		return err
	}
	r.Allocation = a
	return nil
}

// saveBooking writes r's record in tx and asks for a cycle (the plan
// sees bookings). Loop only.
func (o *Orchestrator) saveBooking(tx *txn, r *api.Reservation) {
	tx.batch.Bookings = append(tx.batch.Bookings, cloneBooking(r))
	o.dirty = true
}

// cloneBooking copies r, slices and pointers included.
func cloneBooking(r *api.Reservation) api.Reservation {
	c := *r
	c.Nodes = slices.Clone(r.Nodes)
	c.Users = slices.Clone(r.Users)
	c.Flags = slices.Clone(r.Flags)
	c.Allocation = slices.Clone(r.Allocation)
	if c.Allocation == nil {
		c.Allocation = []api.Allocation{}
	}
	for _, p := range []**time.Time{&c.UsedAt, &c.ReleasedAt, &c.EndedAt} {
		if *p != nil {
			*p = new(**p)
		}
	}
	return c
}
