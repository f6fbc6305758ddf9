package bookings

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/sched"
)

// The scheduler's side of bookings (docs/bookings-scheduling.md): the
// cycle hands the core the bookings as blocked intervals on specific GPUs
// (internal/sched/booking.go) and acts on what it decides: jobs told to
// leave booked GPUs before a window (preemptions, handled as any), jobs
// of a booking stopped when its window ends (expiries: the time-limit
// treatment, reason reservation_ended, which the orchestrator gives),
// starts in a booking (the booking's UsedAt, the job's Reservation field:
// the API's name for its booking).

// View sets the booking part of the core's view of queued job j.
func View(sj *sched.Job, j *api.Job) {
	sj.Booking = j.Reservation
	if j.TimeLimit != nil {
		sj.TimeLimit = j.TimeLimit.Duration()
	}
	if j.PreemptGrace != nil {
		sj.Grace = j.PreemptGrace.Duration()
	}
}

// Outcome is how a job stopped at its booking's end ends.
func Outcome(j *api.Job, code int) (api.State, string, string) {
	return api.StateFailed, api.ReasonReservationEnded,
		fmt.Sprintf("its booking %s ended and it was stopped (exit code %d)", j.Reservation, code)
}

// endedLookback is how long after its end a booking is still handed to
// the core, so that the jobs still running in it are stopped (a server
// down at the end stops them when it is back within that time).
const endedLookback = 24 * time.Hour

// list returns every booking that has not ended by now, with the
// occurrences of repeating bookings expanded over the planning horizon
// (each occurrence its own Reservation with its own Start and End). The
// scheduling cycle turns them into blocked intervals.
func (b *Books) list(now time.Time) []*api.Reservation {
	var out []*api.Reservation
	for _, r := range b.byName {
		if !live(r) || !r.End.After(now) {
			continue
		}
		if period(r) == 0 {
			out = append(out, r) // one window: no expansion to allocate
			continue
		}
		for i, w := range occurrences(r, now.Add(horizon)) {
			if !w.end.After(now) {
				continue
			}
			if i == 0 {
				out = append(out, r)
				continue
			}
			c := Clone(r)
			c.Start, c.End, c.Occurrence = w.start, w.end, r.Occurrence+i
			c.State, c.UsedAt, c.UsedGPUSeconds = api.BookingScheduled, nil, 0
			out = append(out, &c)
		}
	}
	return out
}

// AddToSnapshot adds the bookings to snap (feature.SnapshotPart): every
// booking not yet ended, its repeats expanded, and those that ended
// within endedLookback (so that the core expires the jobs still in them;
// not those released, whose jobs run on); it fills in the running jobs'
// bookings and grace, and the queued jobs' default grace.
func (b *Books) AddToSnapshot(snap *sched.Snapshot, now time.Time) {
	if len(b.byName) == 0 {
		return
	}
	list := b.list(now)
	listed := make(map[string]bool, len(list))
	for _, r := range list {
		listed[r.Name] = true
	}
	for _, r := range b.byName {
		if !listed[r.Name] && !r.End.After(now) && now.Sub(r.End) < endedLookback && r.State != "released" {
			list = append(list, r) // ended: the jobs still in it are to stop
		}
	}
	def := b.cluster.PreemptGrace()
	for i := range snap.Running {
		r := &snap.Running[i]
		if j := b.cluster.Get(r.ID); j != nil { // nil: a hold outside the queue
			r.Booking, r.Grace = j.Reservation, def
			if j.PreemptGrace != nil {
				r.Grace = j.PreemptGrace.Duration()
			}
		}
	}
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

// At is the core's view of the bookings not ended by now.
func (b *Books) At(now time.Time) []sched.Booking {
	var bs []sched.Booking
	for _, r := range b.list(now) {
		bs = append(bs, schedBooking(r))
	}
	return bs
}

// schedBooking is the core's view of a booking.
func schedBooking(r *api.Reservation) sched.Booking {
	as := slices.Clone(r.Allocation)
	slices.SortStableFunc(as, func(a, b api.Allocation) int { return strings.Compare(a.NodeID, b.NodeID) })
	return sched.Booking{Name: r.Name, Placements: sched.PlacementsOf(as), Start: r.Start, End: r.End,
		Users: r.Users, Project: r.Project, Flex: slices.Contains(r.Flags, api.BookingFlex),
		Magnetic: slices.Contains(r.Flags, api.BookingMagnetic), Maint: slices.Contains(r.Flags, api.BookingMaint)}
}

// Started records, in tx, that a job starts in booking name (its own, or
// a magnetic one it landed in): the booking is used from now. A job that
// landed in a magnetic booking keeps naming none, so that, requeued, it
// may run anywhere again.
func (b *Books) Started(tx feature.Tx, name string) {
	if name == "" {
		return
	}
	if r := b.byName[name]; r != nil && r.UsedAt == nil {
		at := tx.Now()
		r.UsedAt = &at
		b.save(tx, r)
	}
}

// CheckSubmit checks the booking a submission names (its reservation
// field, the API's word for a booking) (feature.SubmitCheck): the booking
// must be in effect (not ended, released or for maintenance) and the
// job's user one of its users.
func (b *Books) CheckSubmit(s *feature.Submission) error {
	j, now := s.Job, s.Now
	name := strings.TrimSpace(s.Request.Reservation)
	if name == "" {
		return nil
	}
	r, ok := b.byName[name]
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

// JobNoter notes a job's notification for the next commit (feature/notes'
// Notes).
type JobNoter interface {
	Job(j *api.Job, k notify.Kind, at time.Time)
}

// Expire gives the jobs whose booking's window ended (the core's
// expiries) the time-limit treatment, in tx: SIGTERM, grace (the cancel
// grace), SIGKILL, asked of the loop through run; they end failed with
// reason reservation_ended (Outcome). A job no longer running, or already
// ending, is left alone.
func (b *Books) Expire(tx feature.Tx, es []sched.Expiry, run feature.Running, notes JobNoter, grace time.Duration) {
	for _, e := range es {
		j := b.cluster.Get(e.JobID)
		if j == nil || j.State != api.StateRunning || j.TimedOut || j.CancelRequested {
			continue
		}
		j.TimedOut, j.ReservationEnded = true, true
		run.Touch(tx, j)
		notes.Job(j, notify.JobTimeLimit, tx.Now())
		run.Stop(tx, j, grace, "", "stop job at its booking's end")
		b.cfg.Log.Info("job's booking ended; stopping it", "job_id", j.ID, "booking", e.Booking)
	}
}
