package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestBookings drives corral reserve against corral up: create, list,
// show, update and delete; an overlapping booking and one past a user's
// allowance are refused with messages naming what is in the way; an
// unused booking is released --purge-after its start, its idle GPU time
// counted.
func TestBookings(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node",
		"--purge-after", "2s", "--booking-allowance", "16")
	srv := []string{"CORRAL_SERVER=" + s.URL}
	ana := append([]string{"CORRAL_TOKEN=" + userToken(t, s, "ana")}, srv...)
	cli := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, env, append([]string{"reserve"}, args...)...)
	}
	// Two days ahead at 09:00, local time, as people write it.
	day := time.Now().AddDate(0, 0, 2)
	start := time.Date(day.Year(), day.Month(), day.Day(), 9, 0, 0, 0, time.Local)
	local := func(t time.Time) string { return t.Format("2006-01-02 15:04") }

	out, errOut, code := cli(srv, "create", "vision", "--gpus", "8", "--nodes", "e2e-node", "--start", local(start), "--duration", "8h",
		"--users", "ana,bo", "--project", "vision")
	if code != 0 || !strings.Contains(out, "e2e-node:0-7") {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli(srv, "list")
	if code != 0 || !strings.Contains(out, "vision") || !strings.Contains(out, "scheduled") || !strings.Contains(out, "ana,bo") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	show := func(name string) api.Reservation {
		t.Helper()
		out, errOut, code := cli(srv, "show", name, "-o", "json")
		var r api.Reservation
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("show %s: exit %d\n%s%s", name, code, out, errOut)
		}
		return r
	}
	if r := show("vision"); !r.Start.Equal(start) || !r.End.Equal(start.Add(8*time.Hour)) || r.Owner == "" || len(r.Allocation) != 8 {
		t.Fatalf("vision: %+v", r)
	}
	if _, errOut, code := cli(srv, "update", "vision", "--duration", "10h"); code != 0 {
		t.Fatalf("update: exit %d: %s", code, errOut)
	}
	if r := show("vision"); !r.End.Equal(start.Add(10 * time.Hour)) {
		t.Fatalf("vision after update ends %v, want %v", r.End, start.Add(10*time.Hour))
	}

	// An overlapping booking is refused, naming the one in the way.
	_, errOut, code = cli(srv, "create", "other", "--gpus", "1", "--start", local(start.Add(9*time.Hour)), "--duration", "2h")
	if code == 0 || !strings.Contains(errOut, "GPUs 0-7 on e2e-node are booked by vision") {
		t.Fatalf("overlap: exit %d: %s", code, errOut)
	}
	// A user books for themselves within the allowance (16 GPU-hours a week here).
	later := start.Add(11 * time.Hour)
	_, errOut, code = cli(ana, "create", "ana-big", "--gpus", "2", "--start", local(later), "--duration", "9h")
	if code == 0 || !strings.Contains(errOut, "the allowance is 16 GPU-hours per user per week") {
		t.Fatalf("allowance: exit %d: %s", code, errOut)
	}
	if _, errOut, code = cli(ana, "create", "ana-small", "--gpus", "2", "--start", local(later), "--duration", "4h"); code != 0 {
		t.Fatalf("ana within her allowance: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(ana, "create", "ana-for-bo", "--gpus", "1", "--start", local(later), "--duration", "1h", "--users", "bo")
	if code == 0 || !strings.Contains(errOut, "yourself") {
		t.Fatalf("ana booked for bo: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(ana, "delete", "vision")
	if code == 0 {
		t.Fatalf("ana deleted the admin's booking: %s", errOut)
	}
	if out, errOut, code = cli(srv, "delete", "vision"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code = cli(srv, "show", "vision"); code == 0 {
		t.Fatal("vision still shown after its deletion")
	}

	// An unused booking is released --purge-after (2s) after its start.
	if out, errOut, code = cli(srv, "create", "soon", "--gpus", "2", "--start", "now", "--duration", "1h", "--users", "ana"); code != 0 {
		t.Fatalf("create soon: exit %d\n%s%s", code, out, errOut)
	}
	var r api.Reservation
	waitFor(t, 30*time.Second, func() string { return "soon released: " + r.State }, func() bool {
		s.mustJSON("GET", "/reservations/soon", nil, 200, &r)
		return r.State == api.BookingReleased
	})
	if r.ReleasedAt == nil || r.IdleGPUSeconds < 2*2 {
		t.Fatalf("soon released with %+v", r)
	}
}
