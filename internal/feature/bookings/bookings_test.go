package bookings

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/holds"
)

// req is a booking request: times as offsets from base.
func req(name string, gpus int, base time.Time, from, to time.Duration) api.ReservationRequest {
	s, e := base.Add(from).Format(time.RFC3339), base.Add(to).Format(time.RFC3339)
	return api.ReservationRequest{Name: name, GPUs: &gpus, Start: &s, End: &e}
}

func with(r api.ReservationRequest, f func(*api.ReservationRequest)) api.ReservationRequest {
	f(&r)
	return r
}

func strs(v ...string) *[]string { return &v }

// create checks and makes a booking at now, as the orchestrator's
// CreateBooking does, returning the transaction it was written in.
func create(b *Books, now time.Time, r api.ReservationRequest, who Booker) (api.Reservation, *featuretest.Tx, error) {
	tx := &featuretest.Tx{At: now}
	if err := CheckCreate(&r); err != nil {
		return api.Reservation{}, tx, err
	}
	got, err := b.Create(tx, r, who)
	return got, tx, err
}

// TestRules drives creations through the rules in order: each step's
// booking is kept when it is accepted, so later steps meet it.
func TestRules(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) // a Monday
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	c := newCluster(node("n1", "H100", 8), node("n2", "A100", 4))
	b := newBooks(c, &now, Config{Allowance: 64})
	admin, ana, bo := Booker{User: "root", Admin: true}, Booker{User: "ana"}, Booker{User: "bo"}
	for _, s := range []struct {
		name   string
		who    Booker
		req    api.ReservationRequest
		status int    // 0: accepted
		field  string // of the refusal
		msg    string // in the refusal's message
		gpus   string // accepted: its allocation, as holds.GPUs says it
	}{
		{"admin books n1 for ana", admin, with(req("vision", 8, base, 9*time.Hour, 17*time.Hour), func(r *api.ReservationRequest) { r.Nodes, r.Users = strs("n1"), strs("ana") }), 0, "", "", "GPUs 0-7 on n1"},
		{"name taken", admin, req("vision", 1, base, 20*time.Hour, 21*time.Hour), 409, "", "exists", ""},
		{"overlap named", admin, with(req("other", 1, base, 16*time.Hour, 18*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n1") }), 422, "gpus", "GPUs 0-7 on n1 are booked by vision 2026-11-30 09:00-17:00 UTC", ""},
		{"right after it", admin, with(req("after", 2, base, 17*time.Hour, 18*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n1") }), 0, "", "", "GPUs 0-1 on n1"},
		{"more A100s than exist", admin, with(req("big", 5, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.GPUType = new("a100") }), 422, "gpus", "has 4", ""},
		{"any 4 while n1 is booked", admin, req("any", 4, base, 10*time.Hour, 11*time.Hour), 0, "", "", "GPUs 0-3 on n2"},
		{"nodes and gpu_type", admin, with(req("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Nodes, r.GPUType = strs("n1"), new("H100") }), 422, "nodes", "not both", ""},
		{"unknown node", admin, with(req("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n9") }), 422, "nodes", "n9", ""},
		{"end before start", admin, req("x", 1, base, 10*time.Hour, 9*time.Hour), 422, "end", "not after start", ""},
		{"start in the past", admin, req("x", 1, base, 6*time.Hour, 9*time.Hour), 422, "start", "in the past", ""},
		{"unknown flag", admin, with(req("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("sticky") }), 422, "flags", "sticky", ""},
		{"bad name", admin, req("no spaces", 1, base, 9*time.Hour, 10*time.Hour), 422, "name", "", ""},
		{"bad user", admin, with(req("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.Users = strs("a b") }), 422, "users", "not a valid user", ""},
		{"no gpus", admin, with(req("x", 1, base, 9*time.Hour, 10*time.Hour), func(r *api.ReservationRequest) { r.GPUs = nil }), 422, "gpus", "required", ""},
		{"a user books for another", ana, with(req("x", 1, base, 20*time.Hour, 21*time.Hour), func(r *api.ReservationRequest) { r.Users = strs("bo") }), 403, "users", "yourself", ""},
		{"a user's maint", ana, with(req("x", 1, base, 20*time.Hour, 21*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("maint") }), 403, "flags", "admins", ""},
		{"bo books 48 GPU-hours", bo, with(req("bo1", 4, base, 24*time.Hour, 36*time.Hour), func(r *api.ReservationRequest) { r.GPUType = new("A100") }), 0, "", "", "GPUs 0-3 on n2"},
		{"bo's next 20 pass the allowance", bo, req("bo2", 4, base, 48*time.Hour, 53*time.Hour), 422, "gpus", "bo already has 48.0 GPU-hours booked that week, and the allowance is 64 GPU-hours", ""},
		{"bo's next week is another week", bo, with(req("bo3", 4, base, 7*24*time.Hour, 7*24*time.Hour+5*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n1") }), 0, "", "", "GPUs 0-3 on n1"},
		{"a daily booking counts each day", ana, with(req("ana-daily", 2, base, 20*time.Hour, 25*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("daily") }), 422, "gpus", "allowance", ""},
		{"admins are not bounded", admin, with(req("nightly", 4, base, 50*time.Hour, 51*time.Hour), func(r *api.ReservationRequest) { r.Flags, r.Nodes = strs("daily"), strs("n2") }), 0, "", "", "GPUs 0-3 on n2"},
		{"a later day's occurrence is in the way", admin, with(req("late", 1, base, 3*24*time.Hour+150*time.Minute, 3*24*time.Hour+4*time.Hour), func(r *api.ReservationRequest) { r.Nodes = strs("n2") }), 422, "gpus", "are booked by nightly 2026-12-03 02:00-03:00 UTC", ""},
		{"daily longer than a day", admin, with(req("x", 1, base, 20*time.Hour, 45*time.Hour), func(r *api.ReservationRequest) { r.Flags = strs("daily") }), 422, "duration", "repeats", ""},
	} {
		r, tx, err := create(b, now, s.req, s.who)
		if s.status == 0 {
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if got := holds.GPUs(r.Allocation); got != s.gpus || r.Owner != s.who.User || r.State != api.BookingScheduled {
				t.Fatalf("%s: got %s owner %s state %s, want %s by %s, scheduled", s.name, got, r.Owner, r.State, s.gpus, s.who.User)
			}
			if len(tx.B.Bookings) != 1 || tx.B.Bookings[0].Name != r.Name {
				t.Fatalf("%s: the batch holds %+v, want its record", s.name, tx.B.Bookings)
			}
			continue
		}
		var e *api.Error
		if !errors.As(err, &e) || e.Status != s.status || e.Field != s.field || !strings.Contains(e.Message, s.msg) {
			t.Fatalf("%s: got %v (%+v), want %d on %q saying %q", s.name, err, e, s.status, s.field, s.msg)
		}
		if !tx.B.Empty() {
			t.Fatalf("%s: a refusal wrote %+v", s.name, tx.B)
		}
	}
	if _, err := b.Get("x"); err == nil {
		t.Fatal("a refused booking was kept")
	}
	if r, _ := b.Get("bo1"); len(r.Users) != 1 || r.Users[0] != "bo" {
		t.Fatalf("bo1's users default to its booker: %v", r.Users)
	}
	// A user may change only their own; a change is checked and keeps the
	// GPUs that still fit.
	if _, err := b.Update(&featuretest.Tx{At: now}, "vision", api.ReservationRequest{GPUs: new(2)}, ana); !errors.Is(err, &api.Error{Status: 403}) {
		t.Fatalf("ana changed root's booking: %v", err)
	}
	if _, err := b.Update(&featuretest.Tx{At: now}, "bo1", api.ReservationRequest{GPUs: new(6)}, bo); err == nil {
		t.Fatal("bo1 grew to 6 A100s of 4")
	}
	if err := CheckUpdate("bo1", &api.ReservationRequest{Name: "bo9"}); err == nil {
		t.Fatal("a booking was renamed")
	}
	if r, err := b.Update(&featuretest.Tx{At: now}, "bo1", api.ReservationRequest{GPUs: new(3)}, bo); err != nil || holds.GPUs(r.Allocation) != "GPUs 0-2 on n2" {
		t.Fatalf("bo1 to 3 GPUs: %+v %v", r, err)
	}
	// One not yet begun is forgotten when deleted, in the store too.
	tx := &featuretest.Tx{At: now}
	if _, err := b.Delete(tx, "bo1", bo); err != nil || len(tx.B.DeleteBookings) != 1 {
		t.Fatalf("deleting bo1: %v, batch %+v", err, tx.B)
	}
	if _, err := b.Get("bo1"); err == nil {
		t.Fatal("bo1 is kept after its deletion")
	}
	if got := b.List(); len(got) != 5 || got[0].Name != "vision" || got[len(got)-1].Name != "bo3" {
		t.Fatalf("the list by start then name: %d, %+v", len(got), got)
	}
}

// TestRunningJobsAndHolds: GPUs of a running job whose time limit runs
// into a booking's start, and of a hold until its expiry, are not booked,
// unless ignore_jobs.
func TestRunningJobsAndHolds(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	c := newCluster(node("n1", "H100", 4))
	hs := holds.New(0)
	b := newBooks(c, &now, Config{Holds: hs})
	c.run(&api.Job{ID: "j1", TimeLimit: new(api.Seconds(2 * 3600))}, now, api.Allocation{NodeID: "n1", GPUID: 0}, api.Allocation{NodeID: "n1", GPUID: 1})
	hs.Add(&api.Hold{JobID: "h1", HeldAt: now, ExpiresAt: new(now.Add(3 * time.Hour)), Allocation: []api.Allocation{{NodeID: "n1", GPUID: 2}, {NodeID: "n1", GPUID: 3}}})
	root := Booker{User: "root", Admin: true}
	_, _, err := create(b, now, req("early", 1, now, time.Hour, 3*time.Hour), root)
	if err == nil || !strings.Contains(err.Error(), "GPUs 0-1 on n1 are held by running job j1 until 2026-11-30 10:00 UTC (its time limit)") ||
		!strings.Contains(err.Error(), "GPUs 2-3 on n1 are held by hold h1 until 2026-11-30 11:00 UTC") {
		t.Fatalf("booked into a running job or a hold: %v", err)
	}
	if r, _, err := create(b, now, req("late", 1, now, 2*time.Hour, 3*time.Hour), root); err != nil || holds.GPUs(r.Allocation) != "GPU 0 on n1" {
		t.Fatalf("after the job's time limit: %+v %v", r, err)
	}
	if _, _, err := create(b, now, with(req("forced", 4, now, time.Hour, 90*time.Minute), func(r *api.ReservationRequest) { r.Flags = strs("ignore_jobs") }), root); err != nil {
		t.Fatalf("ignore_jobs: %v", err)
	}
}

// TestAllowanceOff: a negative allowance leaves booking to admins.
func TestAllowanceOff(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	b := newBooks(newCluster(node("n1", "H100", 8)), &now, Config{Allowance: -1})
	var e *api.Error
	if _, _, err := create(b, now, req("a", 1, now, time.Hour, 2*time.Hour), Booker{User: "ana"}); !errors.As(err, &e) || e.Status != 403 {
		t.Fatalf("a user booked with --booking-allowance 0: %v", err)
	}
	if _, _, err := create(b, now, req("a", 1, now, time.Hour, 2*time.Hour), Booker{User: "root", Admin: true}); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalNamesFew: a refusal names the first maxBlockers bookings in
// the way, then how many more.
func TestRefusalNamesFew(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	b := newBooks(newCluster(node("n1", "H100", 8)), &now, Config{})
	root := Booker{User: "root", Admin: true}
	for i := range 7 {
		if _, _, err := create(b, now, req(fmt.Sprintf("r%d", i), 1, now, time.Hour, 2*time.Hour), root); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := create(b, now, req("all", 8, now, time.Hour, 2*time.Hour), root)
	if err == nil || !strings.Contains(err.Error(), "only 1 are free then: GPU 0 on n1 is booked by r0") || !strings.Contains(err.Error(), "GPU 4 on n1 is booked by r4") ||
		!strings.Contains(err.Error(), "; and 2 more bookings, jobs or holds") || strings.Contains(err.Error(), "by r5") {
		t.Fatalf("a refusal with 7 in the way: %v", err)
	}
}
