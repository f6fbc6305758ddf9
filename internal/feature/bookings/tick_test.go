package bookings

import (
	"fmt"
	"iter"
	"math"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/sched"
)

// step runs one tick's Step at now and returns its transaction.
func step(b *Books, now time.Time) *featuretest.Tx {
	tx := &featuretest.Tx{At: now}
	b.Step(tx)
	return tx
}

// TestLifecycle: an unused booking is released PurgeAfter after its
// start, its idle time charged and its booker told; a used one ends at
// its end with its jobs' GPU time taken off; a daily one moves on.
func TestLifecycle(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	base := now
	c := newCluster(node("n1", "H100", 8))
	told := &noter{}
	b := newBooks(c, &now, Config{PurgeAfter: 30 * time.Minute, Notes: told})
	root := Booker{User: "root", Admin: true}
	for _, r := range []api.ReservationRequest{
		req("unused", 2, base, time.Minute, 2*time.Hour),
		req("used", 2, base, time.Minute, 2*time.Hour),
	} {
		if _, _, err := create(b, now, r, root); err != nil {
			t.Fatal(err)
		}
	}
	if tx := step(b, now); !tx.B.Empty() {
		t.Fatalf("a tick before any window changed %+v", tx.B)
	}
	now = base.Add(2 * time.Minute) // every window open
	if tx := step(b, now); len(tx.B.Bookings) != 2 {
		t.Fatalf("windows opened: %d records, want 2", len(tx.B.Bookings))
	}
	if r, _ := b.Get("unused"); r.State != api.BookingActive {
		t.Fatalf("unused at 08:02: %s", r.State)
	}
	c.run(&api.Job{ID: "j1", Reservation: "used"}, now, api.Allocation{NodeID: "n1", GPUID: 0})
	step(b, now.Add(time.Second))
	if r, _ := b.Get("used"); r.UsedAt == nil || !r.UsedAt.Equal(now) {
		t.Fatalf("used's used_at: %v, want %v", r.UsedAt, now)
	}
	now = base.Add(32 * time.Minute) // past the purge time
	step(b, now)
	r, _ := b.Get("unused")
	if want := 2 * 31 * 60.0; r.State != api.BookingReleased || math.Abs(r.IdleGPUSeconds-want) > 1 || c.charged["unused"] != r.IdleGPUSeconds {
		t.Fatalf("unused: %s with %v idle GPU-seconds (want released, %v), charged %v", r.State, r.IdleGPUSeconds, want, c.charged["unused"])
	}
	if len(told.evs) != 1 || told.evs[0].Kind != notify.ReservationReleased || told.evs[0].Booking.Name != "unused" {
		t.Fatalf("notifications: %+v", told.evs)
	}
	// The job runs 58 (08:02 to 09:00) of the used booking's 119 minutes
	// on one GPU of its two.
	c.end("j1", base.Add(time.Hour))
	now = base.Add(61 * time.Minute)
	step(b, now)
	if r, _ := b.Get("used"); r.State != api.BookingActive || math.Abs(r.UsedGPUSeconds-58*60) > 1 {
		t.Fatalf("used after its job ended: %s used %v", r.State, r.UsedGPUSeconds)
	}
	now = base.Add(3 * time.Hour)
	step(b, now)
	r, _ = b.Get("used")
	if want := 2*119*60.0 - 58*60; r.State != api.BookingEnded || r.EndedAt == nil || math.Abs(r.IdleGPUSeconds-want) > 1 {
		t.Fatalf("used ended: %s idle %v, want ended with %v", r.State, r.IdleGPUSeconds, want)
	}
	if len(told.evs) != 1 {
		t.Fatalf("an ended booking was told as released: %+v", told.evs)
	}
	// A booking deleted in its window is released, its idle time so far
	// counted, and nobody is told.
	if _, _, err := create(b, now, req("brief", 4, now, time.Minute, time.Hour), root); err != nil {
		t.Fatal(err)
	}
	now = now.Add(11 * time.Minute)
	r, err := b.Delete(&featuretest.Tx{At: now}, "brief", root)
	if err != nil || r.State != api.BookingReleased || math.Abs(r.IdleGPUSeconds-4*10*60) > 1 || len(told.evs) != 1 {
		t.Fatalf("deleted in its window: %+v %v, %d told", r, err, len(told.evs))
	}
}

// TestRepeats: a weekly booking moves on to its next window when one
// closes; the cycle sees its next occurrences within the horizon.
func TestRepeats(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	base := now
	b := newBooks(newCluster(node("n1", "H100", 8)), &now, Config{PurgeAfter: -1})
	root := Booker{User: "root", Admin: true}
	if _, _, err := create(b, now, with(req("d", 1, base, time.Minute, time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("daily") }), root); err != nil {
		t.Fatal(err)
	}
	if n := len(b.At(now)); n != 1+6 {
		t.Fatalf("%d occurrences, want today's and the next 6 days' within the horizon", n)
	}
	now = base.Add(90 * time.Minute)
	step(b, now)
	r, _ := b.Get("d")
	if r.Occurrence != 1 || !r.Start.Equal(base.Add(24*time.Hour+time.Minute)) || r.State != api.BookingScheduled || math.Abs(r.IdleGPUSeconds-59*60) > 1 {
		t.Fatalf("daily after its first window: %+v", r)
	}
}

// expiryRunning records what Expire asks of the loop and tells the
// notifications.
type expiryRunning struct {
	touched, stops, notes []string
}

func (r *expiryRunning) Active() iter.Seq[*api.Job]     { return nil }
func (r *expiryRunning) Touch(_ feature.Tx, j *api.Job) { r.touched = append(r.touched, j.ID) }
func (r *expiryRunning) Stop(_ feature.Tx, j *api.Job, grace time.Duration, notice, _ string) {
	r.stops = append(r.stops, fmt.Sprintf("%s %s %q", j.ID, grace, notice))
}
func (r *expiryRunning) Job(j *api.Job, k notify.Kind, _ time.Time) {
	r.notes = append(r.notes, j.ID+" "+string(k))
}

// TestExpire: a running job of a booking whose window ended is marked
// timed out by its booking, its row written, its owner told, and its stop
// asked with the cancel grace; one not running, or already ending, or
// gone, is left alone.
func TestExpire(t *testing.T) {
	c := newCluster()
	c.jobs["run"] = &api.Job{ID: "run", State: api.StateRunning, Reservation: "b"}
	c.jobs["ending"] = &api.Job{ID: "ending", State: api.StateRunning, Reservation: "b", CancelRequested: true}
	c.jobs["queued"] = &api.Job{ID: "queued", State: api.StateQueued, Reservation: "b"}
	var now time.Time
	b := newBooks(c, &now, Config{})
	r := &expiryRunning{}
	es := []sched.Expiry{{JobID: "run", Booking: "b"}, {JobID: "ending", Booking: "b"}, {JobID: "queued", Booking: "b"}, {JobID: "gone", Booking: "b"}}
	b.Expire(&featuretest.Tx{}, es, r, r, 10*time.Second)
	if j := c.jobs["run"]; !j.TimedOut || !j.ReservationEnded {
		t.Errorf("run: timed out %v, booking ended %v", j.TimedOut, j.ReservationEnded)
	}
	if got := fmt.Sprint(r.touched, r.stops, r.notes); got != `[run] [run 10s ""] [run job.time_limit]` {
		t.Errorf("touched, stops, notes = %s", got)
	}
	if c.jobs["ending"].ReservationEnded || c.jobs["queued"].ReservationEnded {
		t.Error("a job not running, or already ending, was expired")
	}
}

// TestTickTx: the tick in the loop's transaction does nothing while there
// is no booking, and moves the bookings along their windows once there
// is one.
func TestTickTx(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	b := newBooks(newCluster(node("n1", "H100", 8)), &now, Config{})
	if tx := (&featuretest.Tx{At: now}); b.TickTx(tx) || !tx.B.Empty() {
		t.Fatalf("no booking: TickTx did work, batch %+v", tx.B)
	}
	if _, _, err := create(b, now, req("r", 2, now, time.Minute, time.Hour), Booker{User: "root", Admin: true}); err != nil {
		t.Fatal(err)
	}
	tx := &featuretest.Tx{At: now.Add(2 * time.Minute)}
	if !b.TickTx(tx) || len(tx.B.Bookings) != 1 {
		t.Fatalf("window opened: TickTx reported no work or wrote %d records, want 1", len(tx.B.Bookings))
	}
	if b.TickName() == "" {
		t.Error("the tick has no name for the log")
	}
}
