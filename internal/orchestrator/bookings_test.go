package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// noteRecorder is a Notifier that keeps the events it is asked to plan.
type noteRecorder struct {
	mu  sync.Mutex
	evs []notify.Event
}

func (r *noteRecorder) Plan(evs []notify.Event) []store.OutboxItem {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, evs...)
	return nil
}

func (r *noteRecorder) Kick() {}

func (r *noteRecorder) released() []*notify.BookingInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*notify.BookingInfo
	for _, ev := range r.evs {
		if ev.Kind == notify.ReservationReleased {
			out = append(out, ev.Booking)
		}
	}
	return out
}

func a100Node(id string, n int) Node {
	nd := simNode(id, n)
	for i := range nd.Devices {
		nd.Devices[i].Model = "A100"
	}
	return nd
}

// bookReq is a booking request for tests: times as offsets from base.
func bookReq(name string, gpus int, base time.Time, from, to time.Duration) api.ReservationRequest {
	s, e := base.Add(from).Format(time.RFC3339), base.Add(to).Format(time.RFC3339)
	return api.ReservationRequest{Name: name, GPUs: &gpus, Start: &s, End: &e}
}

func with(r api.ReservationRequest, f func(*api.ReservationRequest)) api.ReservationRequest {
	f(&r)
	return r
}

func strs(v ...string) *[]string { return &v }

// TestBookingRules drives creations through the rules in order: each
// step's booking is kept when it is accepted, so later steps meet it.
func TestBookingRules(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)} // a Monday
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8), a100Node("n2", 4)}, Tick: time.Hour, Now: clk.now, BookingAllowance: 64})
	admin, ana, bo := bookings.Booker{User: "root", Admin: true}, bookings.Booker{User: "ana", Admin: false}, bookings.Booker{User: "bo", Admin: false}
	steps := []struct {
		name   string
		who    bookings.Booker
		req    api.ReservationRequest
		status int    // 0: accepted
		field  string // of the refusal
		msg    string // in the refusal's message
		gpus   string // accepted: its allocation, as holds.GPUs says it
	}{
		{"admin books n1 for ana", admin, with(bookReq("vision", 8, base, 9*time.Hour, 17*time.Hour), func(r *api.ReservationRequest) { r.Nodes, r.Users = strs("n1"), strs("ana") }), 0, "", "", "GPUs 0-7 on n1"},
		{"name taken", admin, bookReq("vision", 1, base, 20*time.Hour, 21*time.Hour), 409, "", "exists", ""},
		{"overlap on n1 refused naming the booking", admin, with(bookReq("other", 1, base, 16*time.Hour, 18*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n1") }), 422, "gpus", "GPUs 0-7 on n1 are booked by vision 2026-11-30 09:00-17:00 UTC", ""},
		{"n1 right after it", admin, with(bookReq("after", 2, base, 17*time.Hour, 18*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n1") }), 0, "", "", "GPUs 0-1 on n1"},
		{"more A100s than exist", admin, with(bookReq("big", 5, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.GPUType = new("a100") }), 422, "gpus", "has 4", ""},
		{"any 4 GPUs while n1 is booked: n2", admin, bookReq("any", 4, base, 10*time.Hour, 11*time.Hour), 0, "", "", "GPUs 0-3 on n2"},
		{"nodes and gpu_type", admin, with(bookReq("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Nodes, r.GPUType = strs("n1"), new("H100") }), 422, "nodes", "not both", ""},
		{"unknown node", admin, with(bookReq("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n9") }), 422, "nodes", "n9", ""},
		{"end before start", admin, bookReq("x", 1, base, 10*time.Hour, 9*time.Hour), 422, "end", "not after start", ""},
		{"start in the past", admin, bookReq("x", 1, base, 6*time.Hour, 9*time.Hour), 422, "start", "in the past", ""},
		{"unknown flag", admin, with(bookReq("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("sticky") }), 422, "flags", "sticky", ""},
		{"bad name", admin, bookReq("no spaces", 1, base, 9*time.Hour, 10*time.Hour), 422, "name", "", ""},
		{"no gpus", admin, with(bookReq("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.GPUs = nil }), 422, "gpus", "required", ""},
		{"a user books for another", ana, with(bookReq("x", 1, base, 20*time.Hour, 21*time.Hour), func(r *api.ReservationRequest) { r.Users = strs("bo") }), 403, "users", "yourself", ""},
		{"a user's maint", ana, with(bookReq("x", 1, base, 20*time.Hour, 21*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("maint") }), 403, "flags", "admins", ""},
		{"bo books 48 GPU-hours", bo, with(bookReq("bo1", 4, base, 24*time.Hour, 36*time.Hour), func(r *api.ReservationRequest) { r.GPUType = new("A100") }), 0, "", "", "GPUs 0-3 on n2"},
		{"bo's next 20 pass the allowance", bo, bookReq("bo2", 4, base, 48*time.Hour, 53*time.Hour), 422, "gpus", "bo already has 48.0 GPU-hours booked that week, and the allowance is 64 GPU-hours", ""},
		{"bo's next week is another week", bo, with(bookReq("bo3", 4, base, 7*24*time.Hour, 7*24*time.Hour+5*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n1") }), 0, "", "", "GPUs 0-3 on n1"},
		{"a daily booking counts each day", ana, with(bookReq("ana-daily", 2, base, 20*time.Hour, 25*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("daily") }), 422, "gpus", "allowance", ""},
		{"admins are not bounded", admin, with(bookReq("nightly", 4, base, 50*time.Hour, 51*time.Hour), func(r *api.ReservationRequest) { r.Flags, r.Nodes = strs("daily"), strs("n2") }), 0, "", "", "GPUs 0-3 on n2"},
		{"a later day's occurrence is in the way", admin, with(bookReq("late", 1, base, 3*24*time.Hour+150*time.Minute, 3*24*time.Hour+4*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n2") }), 422, "gpus", "are booked by nightly 2026-12-03 02:00-03:00 UTC", ""},
		{"beside it", admin, with(bookReq("late2", 1, base, 3*24*time.Hour+3*time.Hour, 3*24*time.Hour+4*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n2") }), 0, "", "", "GPU 0 on n2"},
		{"daily longer than a day", admin, with(bookReq("x", 1, base, 20*time.Hour, 45*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("daily") }), 422, "duration", "repeats", ""},
	}
	for _, s := range steps {
		r, err := h.o.FeatureOps().Bookings.Create(context.Background(), s.req, s.who)
		if s.status == 0 {
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if got := holds.GPUs(r.Allocation); got != s.gpus || r.Owner != s.who.User || r.State != api.BookingScheduled {
				t.Fatalf("%s: got %s owner %s state %s, want %s by %s, scheduled", s.name, got, r.Owner, r.State, s.gpus, s.who.User)
			}
			continue
		}
		var e *api.Error
		if !errors.As(err, &e) || e.Status != s.status || e.Field != s.field || !strings.Contains(e.Message, s.msg) {
			t.Fatalf("%s: got %v (%+v), want %d on %q saying %q", s.name, err, e, s.status, s.field, s.msg)
		}
		if _, err := h.o.FeatureOps().Bookings.Get(s.req.Name); err == nil && s.req.Name == "x" {
			t.Fatalf("%s: a refused booking was kept", s.name)
		}
	}
	// Users default to the booker; a user may change only their own.
	if r, _ := h.o.FeatureOps().Bookings.Get("bo1"); len(r.Users) != 1 || r.Users[0] != "bo" {
		t.Fatalf("bo1's users: %v", r.Users)
	}
	if _, err := h.o.FeatureOps().Bookings.Update(context.Background(), "vision", api.ReservationRequest{GPUs: new(2)}, ana); !errors.Is(err, &api.Error{Status: 403}) {
		t.Fatalf("ana changed root's booking: %v", err)
	}
	// An update is checked too, and keeps the GPUs that still fit.
	if _, err := h.o.FeatureOps().Bookings.Update(context.Background(), "bo1", api.ReservationRequest{GPUs: new(6)}, bo); err == nil {
		t.Fatal("bo1 grew to 6 A100s of 4")
	}
	if r, err := h.o.FeatureOps().Bookings.Update(context.Background(), "bo1", api.ReservationRequest{GPUs: new(3)}, bo); err != nil || len(r.Allocation) != 3 {
		t.Fatalf("bo1 to 3 GPUs: %+v %v", r, err)
	}
	if r, _ := h.o.FeatureOps().Bookings.Get("bo1"); r.GPUs != 3 {
		t.Fatalf("bo1 after update: %+v", r)
	}
	// A booking not yet begun is forgotten when deleted, in the store too.
	if _, err := h.o.FeatureOps().Bookings.Delete(context.Background(), "bo1", bo); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.stop = nil
	h2 := startConfig(t, h.path, Config{Nodes: []Node{simNode("n1", 8), a100Node("n2", 4)}, Tick: time.Hour, Now: clk.now, BookingAllowance: 64})
	if _, err := h2.o.FeatureOps().Bookings.Get("bo1"); err == nil {
		t.Fatal("bo1 came back after its deletion")
	}
	r, err := h2.o.FeatureOps().Bookings.Get("vision")
	if err != nil || r.GPUs != 8 || len(r.Allocation) != 8 || r.Users[0] != "ana" {
		t.Fatalf("vision after a restart: %+v %v", r, err)
	}
}

// TestBookingRunningJobs: GPUs of a running job whose time limit runs into
// a booking's start are not booked, unless ignore_jobs.
func TestBookingRunningJobs(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 2)}, Tick: time.Hour, Now: clk.now})
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: new(2), TimeLimit: api.RawValue(`"2h"`)})
	h.nextStart()
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
	h.waitState(j.ID, api.StateRunning)
	root := bookings.Booker{User: "root", Admin: true}
	base := clk.now()
	_, err := h.o.FeatureOps().Bookings.Create(context.Background(), bookReq("early", 1, base, time.Hour, 3*time.Hour), root)
	if err == nil || !strings.Contains(err.Error(), "GPUs 0-1 on n1 are held by running job "+j.ID+" until 2026-11-30 10:00 UTC (its time limit)") {
		t.Fatalf("booked into a running job: %v", err)
	}
	if _, err := h.o.FeatureOps().Bookings.Create(context.Background(), bookReq("late", 1, base, 2*time.Hour, 3*time.Hour), root); err != nil {
		t.Fatalf("after the job's time limit: %v", err)
	}
	if _, err := h.o.FeatureOps().Bookings.Create(context.Background(), with(bookReq("forced", 1, base, time.Hour, 90*time.Minute), func(r *api.ReservationRequest) { r.Flags = strs("ignore_jobs") }), root); err != nil {
		t.Fatalf("ignore_jobs: %v", err)
	}
}

// waitBooking polls until the booking satisfies ok.
func waitBooking(t *testing.T, o *Orchestrator, name string, ok func(api.Reservation) bool) api.Reservation {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := o.FeatureOps().Bookings.Get(name)
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("booking %s: %+v %v", name, r, err)
		}
		ch := o.Changed()
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestBookingLifecycle: an unused booking is released PurgeAfter after its
// start, its idle time counted; a used one ends at its end with its jobs'
// GPU time taken off; a daily one moves on to its next window.
func TestBookingLifecycle(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	notes := &noteRecorder{}
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: 10 * time.Millisecond, Now: clk.now, PurgeAfter: 30 * time.Minute, Notify: notes})
	root := bookings.Booker{User: "root", Admin: true}
	base := clk.now()
	ctx := context.Background()
	for _, req := range []api.ReservationRequest{
		bookReq("unused", 2, base, time.Minute, 2*time.Hour),
		bookReq("used", 2, base, time.Minute, 2*time.Hour),
		with(bookReq("daily", 1, base, time.Minute, time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("daily") }),
	} {
		if _, err := h.o.FeatureOps().Bookings.Create(ctx, req, root); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.o.bookingsLocked(base)); n != 3+6 {
		t.Fatalf("reservationList: %d entries, want 3 and daily's next 6 days within the horizon", n)
	}
	clk.add(2 * time.Minute) // 08:02: every window open
	waitBooking(t, h.o, "unused", func(r api.Reservation) bool { return r.State == api.BookingActive })
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: new(1)})
	h.nextStart()
	h.o.mu.Lock()
	h.o.jobs.Get(j.ID).Reservation = "used" // as --reservation used (the bookings-sched part) sets it
	h.o.mu.Unlock()
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: clk.now()})
	h.waitState(j.ID, api.StateRunning)
	waitBooking(t, h.o, "used", func(r api.Reservation) bool { return r.UsedAt != nil })
	clk.add(30 * time.Minute) // 08:32: past the purge time
	r := waitBooking(t, h.o, "unused", func(r api.Reservation) bool { return r.State == api.BookingReleased })
	if want := 2 * 31 * 60.0; math.Abs(r.IdleGPUSeconds-want) > 1 || r.ReleasedAt == nil {
		t.Fatalf("unused released with %v idle GPU-seconds (want %v), at %v", r.IdleGPUSeconds, want, r.ReleasedAt)
	}
	waitBooking(t, h.o, "daily", func(r api.Reservation) bool { return r.State == api.BookingReleased })
	if rel := notes.released(); len(rel) != 2 || rel[0].Name != "daily" || rel[1].Name != "unused" || rel[1].Owner != "root" || rel[1].Users[0] != "root" {
		t.Fatalf("release notifications: %+v", rel)
	}
	if r, _ := h.o.FeatureOps().Bookings.Get("used"); r.State != api.BookingActive {
		t.Fatalf("a used booking was purged: %+v", r)
	}
	// The job runs 58 (08:02 to 09:00) of the used booking's 119 minutes.
	clk.add(28 * time.Minute) // 09:00
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: clk.now()})
	h.waitState(j.ID, api.StateCompleted)
	clk.add(2 * time.Hour)
	r = waitBooking(t, h.o, "used", func(r api.Reservation) bool { return r.State == api.BookingEnded })
	if want := 2*119*60.0 - 58*60; math.Abs(r.IdleGPUSeconds-want) > 1 || math.Abs(r.UsedGPUSeconds-58*60) > 1 {
		t.Fatalf("used ended with idle %v used %v, want idle %v used %v", r.IdleGPUSeconds, r.UsedGPUSeconds, want, 58*60.0)
	}
	if n := len(notes.released()); n != 2 {
		t.Fatalf("%d release notifications; an ended booking is not released", n)
	}
	// A booking deleted in its window is released, its idle time so far
	// counted, and nobody is told (they asked for it).
	now := clk.now()
	if _, err := h.o.FeatureOps().Bookings.Create(ctx, bookReq("brief", 4, now, time.Minute, time.Hour), root); err != nil {
		t.Fatal(err)
	}
	clk.add(11 * time.Minute)
	waitBooking(t, h.o, "brief", func(r api.Reservation) bool { return r.State == api.BookingActive })
	if r, err := h.o.FeatureOps().Bookings.Update(ctx, "brief", api.ReservationRequest{Duration: api.RawValue(`"2h"`)}, root); err != nil || !r.End.Equal(now.Add(121*time.Minute)) {
		t.Fatalf("extending a booking in its window: %+v %v", r, err)
	}
	r, err := h.o.FeatureOps().Bookings.Delete(ctx, "brief", root)
	if err != nil || r.State != api.BookingReleased || math.Abs(r.IdleGPUSeconds-4*10*60) > 1 {
		t.Fatalf("deleted in its window: %+v %v", r, err)
	}
	if n := len(notes.released()); n != 2 {
		t.Fatalf("%d release notifications; a deletion tells nobody", n)
	}
}

// bookingsLocked is the core's view of the bookings at now, each
// occurrence of a repeating one counted, under the read lock (tests).
func (o *Orchestrator) bookingsLocked(now time.Time) []sched.Booking {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.bookings.At(now)
}

// TestBookingDailyMovesOn: a repeating booking that was used moves on to
// its next window when one closes.
func TestBookingDailyMovesOn(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	h := startConfig(t, filepath.Join(t.TempDir(), "c.db"), Config{Nodes: []Node{simNode("n1", 8)}, Tick: 10 * time.Millisecond, Now: clk.now, PurgeAfter: -1})
	base := clk.now()
	if _, err := h.o.FeatureOps().Bookings.Create(context.Background(), with(bookReq("d", 1, base, time.Minute, time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("weekly") }), bookings.Booker{User: "root", Admin: true}); err != nil {
		t.Fatal(err)
	}
	clk.add(90 * time.Minute)
	r := waitBooking(t, h.o, "d", func(r api.Reservation) bool { return r.Occurrence == 1 })
	if !r.Start.Equal(base.Add(7*24*time.Hour+time.Minute)) || r.State != api.BookingScheduled || math.Abs(r.IdleGPUSeconds-59*60) > 1 {
		t.Fatalf("weekly after its first window: %+v", r)
	}
}

// TestBookingRefusalNamesFew: a refusal names the first maxBlockers
// bookings in the way, then how many more.
func TestBookingRefusalNamesFew(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Now: clk.now})
	root, base := bookings.Booker{User: "root", Admin: true}, clk.now()
	for i := range 7 {
		if _, err := h.o.FeatureOps().Bookings.Create(context.Background(), bookReq(fmt.Sprintf("r%d", i), 1, base, time.Hour, 2*time.Hour), root); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.o.FeatureOps().Bookings.Create(context.Background(), bookReq("all", 8, base, time.Hour, 2*time.Hour), root)
	if err == nil || !strings.Contains(err.Error(), "only 1 are free then: GPU 0 on n1 is booked by r0") || !strings.Contains(err.Error(), "GPU 4 on n1 is booked by r4") ||
		!strings.Contains(err.Error(), "; and 2 more bookings, jobs or holds") || strings.Contains(err.Error(), "by r5") {
		t.Fatalf("a refusal with 7 in the way: %v", err)
	}
}
