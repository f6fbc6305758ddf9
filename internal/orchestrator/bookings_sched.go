package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/sched"
)

// The scheduler's side of bookings (issue 14; docs/bookings-scheduling.md):
// the cycle hands the core the bookings as blocked intervals on specific
// GPUs (internal/sched/booking.go) and acts on what it decides: jobs told to
// leave booked GPUs before a window (preemptions, handled as any), jobs of
// a booking stopped when its window ends (expiries: the time-limit
// treatment, reason reservation_ended), starts in a booking (the booking's
// UsedAt, the job's Reservation field: the API's name for its booking).

// bookingView sets the booking part of the core's view of queued job j.
func bookingView(sj *sched.Job, j *api.Job) {
	sj.Booking = j.Reservation
	if j.TimeLimit != nil {
		sj.TimeLimit = j.TimeLimit.Duration()
	}
	if j.PreemptGrace != nil {
		sj.Grace = j.PreemptGrace.Duration()
	}
}

// preemptGrace is job j's SIGTERM to SIGKILL time when preempted.
func (o *Orchestrator) preemptGrace(j *api.Job) time.Duration {
	if j.PreemptGrace != nil {
		return j.PreemptGrace.Duration()
	}
	return o.policy.PreemptGrace.Duration()
}

// endedLookback is how long after its end a booking is still handed to
// the core, so that the jobs still running in it are stopped (a server
// down at the end stops them when it is back within that time).
const endedLookback = 24 * time.Hour

// snapshotBookings adds the bookings to snap: every booking not yet ended
// (o.bookingList), and those that ended within endedLookback (so that
// the core expires the jobs still in them; not those released, whose
// jobs run on); it fills in the running jobs'
// bookings and grace, and the queued jobs' default grace. Loop only, or
// with a lock held.
func (o *Orchestrator) snapshotBookings(snap *sched.Snapshot, now time.Time) {
	if len(o.bookings) == 0 {
		return
	}
	list := o.bookingList(now)
	listed := make(map[string]bool, len(list))
	for _, r := range list {
		listed[r.Name] = true
	}
	for _, b := range o.bookings {
		if !listed[b.Name] && !b.End.After(now) && now.Sub(b.End) < endedLookback && b.State != "released" {
			list = append(list, b) // ended: the jobs still in it are to stop
		}
	}
	for i := range snap.Running {
		r := &snap.Running[i]
		if j := o.jobs[r.ID]; j != nil { // nil: a hold outside the queue
			r.Booking, r.Grace = j.Reservation, o.preemptGrace(j)
		}
	}
	def := o.policy.PreemptGrace.Duration()
	for i := range snap.Queue {
		if snap.Queue[i].Grace == 0 {
			snap.Queue[i].Grace = def
		}
	}
	snap.Bookings = make([]sched.Booking, 0, len(list))
	for _, r := range list {
		snap.Bookings = append(snap.Bookings, schedBooking(r))
	}
}

// bookingsAt is the core's view of the bookings not ended by now. Write
// lock held, or the loop.
func (o *Orchestrator) bookingsAt(now time.Time) []sched.Booking {
	var bs []sched.Booking
	for _, r := range o.bookingList(now) {
		bs = append(bs, schedBooking(r))
	}
	return bs
}

// schedBooking is the core's view of a booking.
func schedBooking(r *api.Reservation) sched.Booking {
	as := slices.Clone(r.Allocation)
	slices.SortStableFunc(as, func(a, b api.Allocation) int { return strings.Compare(a.NodeID, b.NodeID) })
	return sched.Booking{Name: r.Name, Placements: placements(as), Start: r.Start, End: r.End,
		Users: r.Users, Project: r.Project, Flex: slices.Contains(r.Flags, api.BookingFlex),
		Magnetic: slices.Contains(r.Flags, api.BookingMagnetic), Maint: slices.Contains(r.Flags, api.BookingMaint)}
}

// startedInBooking records that job j starts in booking name (its own, or
// a magnetic one it landed in): the booking is used from now. A job that
// landed in a magnetic booking keeps naming none, so that, requeued, it
// may run anywhere again. Write lock held.
// UsedAt is written with the transaction's other changes.
func (o *Orchestrator) startedInBooking(tx *txn, j *api.Job, name string) {
	if name == "" {
		return
	}
	if r := o.bookings[name]; r != nil && r.UsedAt == nil {
		at := tx.now
		r.UsedAt = &at
		o.saveBooking(tx, r)
	}
}

// expire gives the jobs whose booking's window ended the time-limit
// treatment: SIGTERM, the cancel grace, SIGKILL; they end failed with
// reason reservation_ended. Write lock held.
func (o *Orchestrator) expire(ctx context.Context, tx *txn, es []sched.Expiry) {
	for _, e := range es {
		j := o.jobs[e.JobID]
		if j == nil || j.State != api.StateRunning || j.TimedOut || j.CancelRequested {
			continue
		}
		j.TimedOut, j.ReservationEnded = true, true
		tx.touch(j)
		o.notes.Job(j, notify.JobTimeLimit, tx.now)
		id, attempt, grace := j.ID, j.RetryCount, o.cfg.CancelGrace
		tx.after = append(tx.after, func() {
			if err := o.cfg.Executor.Stop(context.WithoutCancel(ctx), id, attempt, grace); err != nil {
				o.log.Error("stop job at its booking's end", "job_id", id, "err", err)
			}
		})
		o.log.Info("job's booking ended; stopping it", "job_id", id, "booking", e.Booking)
	}
}

// bookingOutcome is how a job stopped at its booking's end ends.
func bookingOutcome(j *api.Job, code int) (api.State, string, string) {
	return api.StateFailed, api.ReasonReservationEnded,
		fmt.Sprintf("its booking %s ended and it was stopped (exit code %d)", j.Reservation, code)
}

// checkJobBooking checks the booking a submission names (its reservation
// field, the API's word for a booking): the booking must be
// in effect (not ended, released or for maintenance) and the job's user
// one of its users. Loop only.
func (o *Orchestrator) checkJobBooking(j *api.Job, req *api.SubmitRequest, now time.Time) error {
	name := strings.TrimSpace(req.Reservation)
	if name == "" {
		return nil
	}
	r, ok := o.bookings[name]
	switch {
	case !ok:
		return api.Invalid("reservation", "no booking named %q (corral reserve list shows them)", name)
	case r.State == "released" || r.State == "ended" || !r.End.After(now):
		return api.Invalid("reservation", "booking %s has ended or was released", name)
	case slices.Contains(r.Flags, api.BookingMaint):
		return api.Invalid("reservation", "booking %s is for maintenance: no job runs in it", name)
	case !slices.Contains(r.Users, j.User):
		return api.Invalid("reservation", "user %s is not one of booking %s's users (%s)", j.User, name, strings.Join(r.Users, ", "))
	}
	j.Reservation = name
	return nil
}
