package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// Bookings over time (docs/bookings.md): on each tick a booking whose
// window began becomes active; one whose window closed ends (a repeating
// one moves to its next window); one still unused PurgeAfter after its
// start is released, and its booker and users are told. When a window
// closes its idle GPU time is computed and charged to the booker
// (chargeBookingIdle).

// bookingJob is a job of a booking seen running (in memory only: a job
// that ends is counted when it is seen gone).
type bookingJob struct {
	booking string
	gpus    int
	started time.Time
}

// loadBookings puts the store's bookings in memory (recover).
func (o *Orchestrator) loadBookings(st *store.State) {
	for i := range st.Bookings {
		r := st.Bookings[i]
		o.bookings[r.Name] = &r
	}
}

// purgeAfter is Config.PurgeAfter with its default; 0: never.
func (o *Orchestrator) purgeAfter() time.Duration {
	switch d := o.cfg.PurgeAfter; {
	case d == 0:
		return DefaultPurgeAfter
	case d < 0:
		return 0
	default:
		return d
	}
}

// checkBookings moves bookings along their windows. Loop only.
func (o *Orchestrator) checkBookings(ctx context.Context) {
	o.mu.Lock()
	if len(o.bookings) == 0 {
		o.mu.Unlock()
		return
	}
	tx := o.begin()
	o.stepBookings(tx)
	if tx.batch.Empty() && !o.notes.Pending() {
		o.mu.Unlock()
		return
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("bookings not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// stepBookings does checkBookings' work in tx. Write lock held.
func (o *Orchestrator) stepBookings(tx *txn) {
	now := tx.now
	changed := map[string]bool{}
	// Jobs of bookings: note the running ones, count those gone.
	if o.bookLive == nil {
		o.bookLive = map[string]bookingJob{}
	}
	for id := range o.active {
		j := o.jobs[id]
		if j == nil || j.Reservation == "" || j.State != api.StateRunning || j.StartedAt == nil {
			continue
		}
		r := o.bookings[j.Reservation]
		if r == nil || !live(r) {
			continue
		}
		if _, ok := o.bookLive[id]; !ok {
			o.bookLive[id] = bookingJob{booking: r.Name, gpus: len(j.Allocation), started: *j.StartedAt}
		}
		if r.UsedAt == nil && now.After(r.Start) && j.StartedAt.Before(r.End) {
			r.UsedAt = new(later(*j.StartedAt, r.Start))
			changed[r.Name] = true
		}
	}
	for id, bj := range o.bookLive {
		if j := o.jobs[id]; j != nil && o.active[id] && j.State == api.StateRunning {
			continue
		}
		end := now
		if j, ok := o.lookup(id); ok && j.FinishedAt != nil { // ended jobs leave o.jobs (finished.go)
			end = *j.FinishedAt
		}
		delete(o.bookLive, id)
		if r := o.bookings[bj.booking]; r != nil && live(r) {
			r.UsedGPUSeconds += bj.used(r, end)
			changed[r.Name] = true
		}
	}
	names := make([]string, 0, len(o.bookings))
	for name := range o.bookings {
		names = append(names, name)
	}
	slices.Sort(names)
	purge := o.purgeAfter()
	for _, name := range names {
		r := o.bookings[name]
		if !live(r) {
			continue
		}
		switch {
		case !now.Before(r.End):
			o.closeBooking(tx, r, api.BookingEnded, r.End, false)
			delete(changed, name)
		case purge > 0 && r.UsedAt == nil && !now.Before(r.Start.Add(purge)):
			o.closeBooking(tx, r, api.BookingReleased, now, true)
			delete(changed, name)
		case r.State == api.BookingScheduled && !now.Before(r.Start):
			r.State = api.BookingActive
			changed[name] = true
		}
	}
	for name := range changed {
		o.saveBooking(tx, o.bookings[name])
	}
}

// used is the GPU time bj spent in r's current window, up to end.
func (bj bookingJob) used(r *api.Reservation, end time.Time) float64 {
	s := later(bj.started, r.Start)
	if end.After(r.End) {
		end = r.End
	}
	if !end.After(s) {
		return 0
	}
	return float64(bj.gpus) * end.Sub(s).Seconds()
}

// closeBooking closes r's current window at `at`, as ended (a repeating
// booking moves on to its next window instead) or released, and computes
// and charges its idle GPU time; a purged booking's booker and users are
// told. Loop only, in tx.
func (o *Orchestrator) closeBooking(tx *txn, r *api.Reservation, state string, at time.Time, purged bool) {
	used := r.UsedGPUSeconds
	for id, bj := range o.bookLive {
		if bj.booking == r.Name {
			used += bj.used(r, at)
			if state == api.BookingReleased {
				delete(o.bookLive, id)
			}
		}
	}
	idle := 0.0
	if at.After(r.Start) {
		idle = max(0, float64(r.GPUs)*at.Sub(r.Start).Seconds()-used)
	}
	r.IdleGPUSeconds += idle
	r.UsedGPUSeconds = used
	tx.chargeBookingIdle(r, idle) // usage.go
	p := bookingPeriod(r)
	switch {
	case state == api.BookingReleased:
		r.State, r.ReleasedAt = api.BookingReleased, new(at)
		o.log.Info("booking released", "booking", r.Name, "idle_gpu_seconds", idle, "purged", purged)
		if purged {
			o.noteBookingReleased(r, idle, at)
		}
	case p > 0:
		d := r.End.Sub(r.Start)
		for !r.End.After(tx.now) {
			r.Start = r.Start.Add(p)
			r.End = r.Start.Add(d)
		}
		r.Occurrence++
		r.UsedAt, r.UsedGPUSeconds = nil, 0
		r.State = api.BookingScheduled
		if !r.Start.After(tx.now) {
			r.State = api.BookingActive
		}
	default:
		r.State, r.EndedAt = api.BookingEnded, new(at)
		o.log.Info("booking ended", "booking", r.Name, "idle_gpu_seconds", idle)
	}
	o.saveBooking(tx, r)
}

// noteBookingReleased notes the reservation.released notification of r.
func (o *Orchestrator) noteBookingReleased(r *api.Reservation, idle float64, at time.Time) {
	if !o.notes.On() {
		return
	}
	text := fmt.Sprintf("Booking %s (%d GPUs, %s, for %s) was released: no job of it ran within %s of its start; %.2f idle GPU-hours are charged to %s",
		r.Name, r.GPUs, window(span{r.Start, r.End}), strings.Join(r.Users, ","), o.purgeAfter(), idle/3600, r.Owner)
	o.notes.Note(notify.Event{Kind: notify.ReservationReleased, At: at.UTC(), Text: text,
		Booking: &notify.BookingInfo{Name: r.Name, Owner: r.Owner, Users: slices.Clone(r.Users), Project: r.Project, GPUs: r.GPUs, IdleGPUSeconds: idle}})
}
