package bookings

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
)

// Bookings over time (docs/bookings.md): on each tick a booking whose
// window began becomes active; one whose window closed ends (a repeating
// one moves to its next window); one still unused PurgeAfter after its
// start is released, and its booker and users are told. When a window
// closes its idle GPU time is computed and charged to the booker
// (Cluster.ChargeIdle).

// runningJob is a job of a booking seen running.
type runningJob struct {
	booking string
	gpus    int
	started time.Time
}

// DefaultPurgeAfter is how long after its start an unused booking is
// released (--purge-after).
const DefaultPurgeAfter = 30 * time.Minute

// purgeAfter is Config.PurgeAfter with its default; 0: never.
func (b *Books) purgeAfter() time.Duration {
	switch d := b.cfg.PurgeAfter; {
	case d == 0:
		return DefaultPurgeAfter
	case d < 0:
		return 0
	default:
		return d
	}
}

// TickTx moves the bookings along their windows each tick, in the loop's
// transaction (feature.TxTicker); it reports whether there were any.
func (b *Books) TickTx(tx feature.Tx) bool {
	if b.Len() == 0 {
		return false
	}
	b.Step(tx)
	return true
}

// TickName names the bookings' tick in the log.
func (b *Books) TickName() string { return "bookings" }

// Step moves the bookings along their windows at tx's time, writing what
// changed in tx: the jobs of bookings seen running are noted and those
// gone counted; windows begin, close, or are released unused.
func (b *Books) Step(tx feature.Tx) {
	now := tx.Now()
	changed := map[string]bool{}
	// Jobs of bookings: note the running ones, count those gone.
	if b.running == nil {
		b.running = map[string]runningJob{}
	}
	for id := range b.cluster.ActiveIDs() {
		j := b.cluster.Get(id)
		if j == nil || j.Reservation == "" || j.State != api.StateRunning || j.StartedAt == nil {
			continue
		}
		r := b.byName[j.Reservation]
		if r == nil || !live(r) {
			continue
		}
		if _, ok := b.running[id]; !ok {
			b.running[id] = runningJob{booking: r.Name, gpus: len(j.Allocation), started: *j.StartedAt}
		}
		if r.UsedAt == nil && now.After(r.Start) && j.StartedAt.Before(r.End) {
			r.UsedAt = new(later(*j.StartedAt, r.Start))
			changed[r.Name] = true
		}
	}
	for id, rj := range b.running {
		if j := b.cluster.Get(id); j != nil && b.cluster.IsActive(id) && j.State == api.StateRunning {
			continue
		}
		end := now
		if j, ok := b.cluster.Lookup(id); ok && j.FinishedAt != nil { // ended jobs leave memory soon
			end = *j.FinishedAt
		}
		delete(b.running, id)
		if r := b.byName[rj.booking]; r != nil && live(r) {
			r.UsedGPUSeconds += rj.used(r, end)
			changed[r.Name] = true
		}
	}
	purge := b.purgeAfter()
	for _, name := range b.names() {
		r := b.byName[name]
		if !live(r) {
			continue
		}
		switch {
		case !now.Before(r.End):
			b.close(tx, r, api.BookingEnded, r.End, false)
			delete(changed, name)
		case purge > 0 && r.UsedAt == nil && !now.Before(r.Start.Add(purge)):
			b.close(tx, r, api.BookingReleased, now, true)
			delete(changed, name)
		case r.State == api.BookingScheduled && !now.Before(r.Start):
			r.State = api.BookingActive
			changed[name] = true
		}
	}
	for name := range changed {
		b.save(tx, b.byName[name])
	}
}

// used is the GPU time rj spent in r's current window, up to end.
func (rj runningJob) used(r *api.Reservation, end time.Time) float64 {
	s := later(rj.started, r.Start)
	if end.After(r.End) {
		end = r.End
	}
	if !end.After(s) {
		return 0
	}
	return float64(rj.gpus) * end.Sub(s).Seconds()
}

// close closes r's current window at `at`, as ended (a repeating booking
// moves on to its next window instead) or released, and computes and
// charges its idle GPU time; a purged booking's booker and users are
// told. In tx.
func (b *Books) close(tx feature.Tx, r *api.Reservation, state string, at time.Time, purged bool) {
	now := tx.Now()
	used := r.UsedGPUSeconds
	for id, rj := range b.running {
		if rj.booking == r.Name {
			used += rj.used(r, at)
			if state == api.BookingReleased {
				delete(b.running, id)
			}
		}
	}
	idle := 0.0
	if at.After(r.Start) {
		idle = max(0, float64(r.GPUs)*at.Sub(r.Start).Seconds()-used)
	}
	r.IdleGPUSeconds += idle
	r.UsedGPUSeconds = used
	b.cluster.ChargeIdle(tx, r, idle)
	p := period(r)
	switch {
	case state == api.BookingReleased:
		r.State, r.ReleasedAt = api.BookingReleased, new(at)
		b.cfg.Log.Info("booking released", "booking", r.Name, "idle_gpu_seconds", idle, "purged", purged)
		if purged {
			b.noteReleased(r, idle, at)
		}
	case p > 0:
		d := r.End.Sub(r.Start)
		for !r.End.After(now) {
			r.Start = r.Start.Add(p)
			r.End = r.Start.Add(d)
		}
		r.Occurrence++
		r.UsedAt, r.UsedGPUSeconds = nil, 0
		r.State = api.BookingScheduled
		if !r.Start.After(now) {
			r.State = api.BookingActive
		}
	default:
		r.State, r.EndedAt = api.BookingEnded, new(at)
		b.cfg.Log.Info("booking ended", "booking", r.Name, "idle_gpu_seconds", idle)
	}
	b.save(tx, r)
}

// noteReleased notes the reservation.released notification of r.
func (b *Books) noteReleased(r *api.Reservation, idle float64, at time.Time) {
	if b.cfg.Notes == nil || !b.cfg.Notes.On() {
		return
	}
	text := fmt.Sprintf("Booking %s (%d GPUs, %s, for %s) was released: no job of it ran within %s of its start; %.2f idle GPU-hours are charged to %s",
		r.Name, r.GPUs, window(span{r.Start, r.End}), strings.Join(r.Users, ","), b.purgeAfter(), idle/3600, r.Owner)
	b.cfg.Notes.Note(notify.Event{Kind: notify.ReservationReleased, At: at.UTC(), Text: text,
		Booking: &notify.BookingInfo{Name: r.Name, Owner: r.Owner, Users: slices.Clone(r.Users), Project: r.Project, GPUs: r.GPUs, IdleGPUSeconds: idle}})
}
