package bookings

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/sched"
)

// TestCheckSubmit: a job may name a booking in effect that lists its user.
func TestCheckSubmit(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	b := newBooks(newCluster(), &now, Config{})
	for _, r := range []*api.Reservation{
		{Name: "vis", Users: []string{"ana"}, Start: now, End: now.Add(time.Hour), State: api.BookingActive},
		{Name: "old", Users: []string{"ana"}, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour), State: api.BookingEnded},
		{Name: "fix", Users: []string{"ana"}, Start: now, End: now.Add(time.Hour), Flags: []string{api.BookingMaint}},
	} {
		b.Add(r)
	}
	for _, c := range []struct{ user, name, err string }{
		{"ana", "", ""},
		{"ana", " vis ", ""},
		{"ana", "nope", "no booking named"},
		{"ana", "old", "has ended"},
		{"ana", "fix", "maintenance"},
		{"bo", "vis", "not one of booking vis's users"},
	} {
		j := &api.Job{User: c.user}
		err := b.CheckSubmit(&feature.Submission{Job: j, Request: &api.SubmitRequest{Reservation: c.name}, Now: now})
		switch {
		case c.err == "" && (err != nil || j.Reservation != strings.TrimSpace(c.name)):
			t.Errorf("%s in %q: %v, job names %q", c.user, c.name, err, j.Reservation)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s in %q: %v, want %q", c.user, c.name, err, c.err)
		}
	}
}

// TestSnapshot: the core gets the live bookings and those ended within
// endedLookback (not the released), the running jobs' bookings and
// grace, and the queue's default grace.
func TestSnapshot(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	c := newCluster(node("n1", "H100", 8))
	b := newBooks(c, &now, Config{})
	snap := &sched.Snapshot{Queue: []sched.Job{{ID: "q"}}}
	b.AddToSnapshot(snap, now)
	if snap.Bookings != nil || snap.Queue[0].Grace != 0 {
		t.Fatalf("no bookings changed the snapshot: %+v", snap)
	}
	as := []api.Allocation{{NodeID: "n1", GPUID: 1}, {NodeID: "n1", GPUID: 0}}
	b.Add(&api.Reservation{Name: "live", Start: now, End: now.Add(time.Hour), State: api.BookingActive, Allocation: as, Flags: []string{api.BookingMagnetic}})
	b.Add(&api.Reservation{Name: "ended", Start: now.Add(-3 * time.Hour), End: now.Add(-time.Hour), State: api.BookingEnded})
	b.Add(&api.Reservation{Name: "released", Start: now.Add(-3 * time.Hour), End: now.Add(-time.Hour), State: api.BookingReleased})
	b.Add(&api.Reservation{Name: "long-ago", Start: now.Add(-48 * time.Hour), End: now.Add(-47 * time.Hour), State: api.BookingEnded})
	c.run(&api.Job{ID: "j", Reservation: "live", PreemptGrace: new(api.Seconds(5))}, now)
	snap = &sched.Snapshot{Queue: []sched.Job{{ID: "q"}}, Running: []sched.Running{{ID: "j"}, {ID: "hold"}}}
	b.AddToSnapshot(snap, now)
	names := map[string]sched.Booking{}
	for _, s := range snap.Bookings {
		names[s.Name] = s
	}
	if len(names) != 2 || !names["live"].Magnetic || len(names["live"].Placements) != 1 || names["ended"].Name == "" {
		t.Fatalf("bookings in the snapshot: %+v", snap.Bookings)
	}
	if r := snap.Running[0]; r.Booking != "live" || r.Grace != 5*time.Second || snap.Running[1].Grace != 0 || snap.Queue[0].Grace != c.grace {
		t.Fatalf("running %+v, queue %+v", snap.Running, snap.Queue)
	}
	// A start in a booking marks it used, once.
	tx := &featuretest.Tx{At: now}
	b.Started(tx, "live")
	b.Started(tx, "live")
	b.Started(tx, "")
	if r, _ := b.Get("live"); r.UsedAt == nil || len(tx.B.Bookings) != 1 {
		t.Fatalf("started in live: used_at %v, %d records", r.UsedAt, len(tx.B.Bookings))
	}
}
