package nodebook

import "time"

// Liveness is judged on the server's own running time. A node is down once
// it has been silent for --node-ttl of the server's attention: time in
// which the server's loop ran and could have applied the node's reports.
//
// The loop looks at its monotonic clock at each tick and at each
// registration (Watch.Look). A gap between two looks of more than
// StallTicks ticks is a stall of the server itself: its process was
// stopped (SIGSTOP), its machine slept, its store held a commit, a reader
// held its lock, a long pause. Agents' reports could not be applied
// meanwhile, so the stall does not count against any node: each node's
// silence starts that much later (its grace), and the server logs a WARN
// line saying so. A restart gives every node that was up a fresh TTL the
// same way; a node that was down before it stays down until its agent
// registers again (its down state is stored with it).

// StallTicks is how many ticks may pass between two looks before the gap
// counts as a stall: a loop busy for a tick or so is not stalled.
const StallTicks = 2

// Watch is the loop's look at its own clock: the time of its last look.
type Watch struct {
	last time.Time
}

// Look records a look at t and returns the stall since the previous one:
// 0 unless more than StallTicks ticks passed, else the gap less the one
// tick that is the loop's own pace. The first look is never a stall.
func (w *Watch) Look(t time.Time, tick time.Duration) time.Duration {
	last := w.last
	w.last = t
	if last.IsZero() {
		return 0
	}
	gap := t.Sub(last) // monotonic when both readings have it
	if gap <= StallTicks*tick {
		return 0
	}
	return gap - tick
}

// SilentSince is when a node's silence began to count: its last report,
// or its grace (the end of the server's last stall, or its start),
// whichever is later.
func SilentSince(lastSeen, grace time.Time) time.Time {
	if grace.After(lastSeen) {
		return grace
	}
	return lastSeen
}
