package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests drive the scheduler's side of bookings
// (docs/bookings-scheduling.md) on a live `corral up --simulate-gpus 8`.
// Bookings themselves are made through /reservations (docs/bookings.md);
// here, the submission of a job that names a booking.

// TestReservationSubmitChecked: a job naming a booking that does not
// exist is refused with 422 naming reservation, by the API and by corral
// submit --reservation, and nothing is queued.
func TestReservationSubmitChecked(t *testing.T) {
	s := startServer(t)
	r := s.do("POST", "/queue/submit", map[string]any{"command": "true", "gpu_count": 1, "user": "ana", "reservation": "nope"}, nil)
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("submit into an unknown booking: %s", r)
	}
	if e := errorBody(t, r); e.Field != "reservation" || !strings.Contains(e.Message, "nope") {
		t.Fatalf("error %+v, want one naming the field reservation and the booking", e)
	}
	env := []string{"CORRAL_SERVER=" + s.URL}
	_, stderr, code := runCLI(t, env, "submit", "--reservation", "nope", "--gpus", "1", "--user", "ana", "true")
	if code == 0 || !strings.Contains(stderr, "reservation") || !strings.Contains(stderr, "nope") {
		t.Fatalf("corral submit --reservation nope: exit %d, stderr %q", code, stderr)
	}
	if n := len(s.jobs()); n != 0 {
		t.Fatalf("%d jobs queued, want none", n)
	}
}

// book makes a booking through POST /reservations (docs/bookings.md) as
// the admin, or skips the test when this build has no such route (the
// bookings' API is built apart from their scheduling).
func book(t *testing.T, s *server, body map[string]any) api.Reservation {
	t.Helper()
	r := s.do("POST", "/reservations", body, nil)
	if r.Status == http.StatusNotFound || r.Status == http.StatusMethodNotAllowed {
		t.Skipf("no POST /reservations in this build: %s", r)
	}
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("POST /reservations: %s", r)
	}
	var b api.Reservation
	if err := json.Unmarshal(r.Body, &b); err != nil || len(b.Allocation) == 0 {
		t.Fatalf("POST /reservations answered %s (%v), want the booking with its GPUs", r, err)
	}
	return b
}

// TestBookingAheadLive: with GPUs booked an hour ahead, a long job runs
// on the other GPUs, a long job that could only use booked ones waits and
// says which booking is in the way, and a short one runs on them.
func TestBookingAheadLive(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	now := time.Now().UTC()
	b := book(t, s, map[string]any{"name": "vis", "gpus": 4, "start": now.Add(time.Hour).Format(time.RFC3339),
		"end": now.Add(3 * time.Hour).Format(time.RFC3339), "users": []string{"ana"}, "project": "vision"})
	booked := map[int]bool{}
	for _, a := range b.Allocation {
		booked[a.GPUID] = true
	}
	long := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 4, "user": "bo", "estimated_duration": "3h"})
	got := s.waitState(long.ID, api.StateRunning, 20*time.Second)
	for _, g := range gpuSet(got.Allocation) {
		if booked[g] {
			t.Fatalf("the long job is on booked GPU %d (booked: %v)", g, booked)
		}
	}
	// Interactive work is never preempted, so it never runs into a booking.
	wait := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 2, "user": "cy", "class": "interactive",
		"estimated_duration": "3h"})
	got = s.waitJob(wait.ID, 20*time.Second, "to wait for the booking", func(j api.Job) bool { return j.PendingReason == "reservation" })
	if !strings.Contains(got.PendingMessage, "are booked by vision") {
		t.Fatalf("the waiting job's message %q, want it to name the booking", got.PendingMessage)
	}
	short := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 4, "user": "bo", "time_limit": "30m"})
	s.waitState(short.ID, api.StateRunning, 20*time.Second)
	if j := s.job(wait.ID); j.State != api.StateQueued {
		t.Fatalf("the long interactive job is %s, want queued", j.State)
	}
	release(t, dir, "all")
	s.waitTerminal(long.ID, 20*time.Second)
	s.waitTerminal(short.ID, 20*time.Second)
	s.do("DELETE", "/queue/"+wait.ID, nil, nil)
}

// TestBookingWindowLive: in the window the booked user's job runs on the
// booked GPUs, and nobody else's job does.
func TestBookingWindowLive(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	now := time.Now().UTC()
	b := book(t, s, map[string]any{"name": "vis", "gpus": 4, "start": now.Add(4 * time.Second).Format(time.RFC3339),
		"end": now.Add(time.Hour).Format(time.RFC3339), "users": []string{"ana"}, "project": "vision"})
	booked := map[int]bool{}
	for _, a := range b.Allocation {
		booked[a.GPUID] = true
	}
	ana := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 2, "user": "ana", "reservation": "vis"})
	got := s.waitState(ana.ID, api.StateRunning, 30*time.Second)
	for _, g := range gpuSet(got.Allocation) {
		if !booked[g] {
			t.Fatalf("ana's job on GPUs %v, want the booked %v", gpuSet(got.Allocation), booked)
		}
	}
	if got.Reservation != "vis" {
		t.Fatalf("ana's job reservation %q", got.Reservation)
	}
	bo := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 2, "user": "bo"})
	got = s.waitState(bo.ID, api.StateRunning, 20*time.Second)
	for _, g := range gpuSet(got.Allocation) {
		if booked[g] {
			t.Fatalf("bo's job on booked GPU %d", g)
		}
	}
	// Two unbooked and two booked GPUs are free: bo's 4-GPU job waits.
	big := s.submit(map[string]any{"command": "true", "gpu_count": 4, "user": "bo"})
	s.waitJob(big.ID, 20*time.Second, "to wait for the booking", func(j api.Job) bool { return j.PendingReason == "reservation" })
	release(t, dir, "all")
	s.waitTerminal(ana.ID, 20*time.Second)
	s.waitTerminal(bo.ID, 20*time.Second)
	s.do("DELETE", "/queue/"+big.ID, nil, nil)
}
