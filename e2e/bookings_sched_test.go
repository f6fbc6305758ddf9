package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// These tests drive the scheduler's side of bookings (issue 14,
// docs/bookings-scheduling.md) on a live `corral up --simulate-gpus 8`.
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
