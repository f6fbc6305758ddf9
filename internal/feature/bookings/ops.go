package bookings

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Ops are the API's operations on bookings: each request checked before
// the loop is asked (a bad one changes nothing), each change one op of
// the loop's transaction, answered once durable, each read under the
// loop's read lock.
type Ops struct {
	Books *Books
	Loop  feature.Loop
}

// List returns every booking (released and ended ones too), by start
// then name.
func (o Ops) List() []api.Reservation { return feature.Read(o.Loop, o.Books.List) }

// Get returns the booking named name.
func (o Ops) Get(name string) (api.Reservation, error) {
	var r api.Reservation
	var err error
	o.Loop.Read(func() { r, err = o.Books.Get(name) })
	return r, err
}

// Create checks and makes a booking for who (Books.Create).
func (o Ops) Create(ctx context.Context, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	if err := CheckCreate(&req); err != nil {
		return api.Reservation{}, err
	}
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (api.Reservation, error) { return o.Books.Create(tx, req, who) })
}

// Update changes the fields req gives of a live booking (Books.Update).
func (o Ops) Update(ctx context.Context, name string, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	if err := CheckUpdate(name, &req); err != nil {
		return api.Reservation{}, err
	}
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (api.Reservation, error) { return o.Books.Update(tx, name, req, who) })
}

// Delete cancels a booking (Books.Delete) and returns it as it was left.
func (o Ops) Delete(ctx context.Context, name string, who Booker) (api.Reservation, error) {
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (api.Reservation, error) { return o.Books.Delete(tx, name, who) })
}
