package orchestrator

import (
	"time"
)

// JobOwner returns the user and project of a job.
func (o *Orchestrator) JobOwner(id string) (user, project string, ok bool) {
	j, ok := o.jobAnywhere(id, false) // reads.go: or one that ended, read without the lock
	if !ok {
		return "", "", false
	}
	return j.User, j.Project, true
}

// HoldOwner returns the user who holds GPUs under id.
func (o *Orchestrator) HoldOwner(id string) (user string, ok bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	h, ok := o.holds.Get(id)
	if !ok {
		if j := o.holdJob(id); j != nil { // a hold queued as a job (holds.go)
			return j.User, true
		}
		return "", false
	}
	return h.User, true
}

// limitTimer wakes the loop when the earliest time limit of a running job
// is due, so that a job is stopped at its limit rather than at the next
// tick after it (up to --tick late otherwise: a 5s limit ran 9s). It is
// armed when a job starts and by each check for the jobs still under their
// limits; a check at any other moment (the tick) finds nothing early, so a
// stale wake-up is harmless. Loop only.
type limitTimer struct {
	t  *time.Timer
	at time.Time // when t fires; zero: not armed
}

// limitSlack is how long after a limit the timer fires: the check stops
// jobs strictly past their limits.
const limitSlack = 5 * time.Millisecond

// arm makes the timer fire at due (plus limitSlack) unless it fires
// earlier already; now is the orchestrator's clock.
func (l *limitTimer) arm(due, now time.Time) {
	if !l.at.IsZero() && !due.Before(l.at) {
		return
	}
	l.at = due
	wait := max(due.Sub(now), 0) + limitSlack
	if l.t == nil {
		l.t = time.NewTimer(wait)
		return
	}
	l.t.Reset(wait) // Go 1.23 timers: no stale value to drain
}

// c is the channel the loop waits on: nil (never ready) when not armed.
func (l *limitTimer) c() <-chan time.Time {
	if l.t == nil || l.at.IsZero() {
		return nil
	}
	return l.t.C
}

// fired records that the timer fired: the check that follows arms it again.
func (l *limitTimer) fired() { l.at = time.Time{} }
