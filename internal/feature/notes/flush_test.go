package notes

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"
)

// TestFlush: the notifications' tick checks the queue wait at its clock
// and asks for a commit only when something was noted: the queue wait's
// alert once it has stayed over for QueueWaitFor.
func TestFlush(t *testing.T) {
	b := &fakeBooks{waits: [][2]time.Time{{t0, {}}}} // queued at t0, still waiting
	n, _ := newNotes(b, Config{QueueWait: time.Hour})
	now := t0
	f := Flush{Notes: n, Now: func() time.Time { return now }}
	cases := []struct {
		at      time.Duration
		pending bool
	}{
		{30 * time.Minute, false},          // under the threshold
		{2 * time.Hour, false},             // over from now
		{2*time.Hour + QueueWaitFor, true}, // over for QueueWaitFor: the alert
	}
	for _, c := range cases {
		now = t0.Add(c.at)
		if got := f.TickTx(&featuretest.Tx{At: now}); got != c.pending {
			t.Fatalf("at +%s: commit %v, want %v", c.at, got, c.pending)
		}
	}
	if f.TickName() != "notifications" {
		t.Fatal(f.TickName())
	}
}
