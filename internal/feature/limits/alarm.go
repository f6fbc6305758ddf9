package limits

import "time"

// Alarm wakes the loop when the earliest time limit of a running job is
// due, so that a job is stopped at its limit rather than at the next tick
// after it (up to --tick late otherwise: a 5s limit ran 9s). It is armed
// when a job starts and by each check for the jobs still under their
// limits (Timer.Arm); a check at any other moment (the tick) finds nothing
// early, so a stale wake-up is harmless. The zero Alarm is not armed.
// Loop only.
type Alarm struct {
	t  *time.Timer
	at time.Time // when t fires; zero: not armed
}

// alarmSlack is how long after a limit the alarm fires: the check stops
// jobs strictly past their limits.
const alarmSlack = 5 * time.Millisecond

// Arm makes the alarm fire at due (plus alarmSlack) unless it fires
// earlier already; now is the orchestrator's clock.
func (l *Alarm) Arm(due, now time.Time) {
	if !l.at.IsZero() && !due.Before(l.at) {
		return
	}
	l.at = due
	wait := max(due.Sub(now), 0) + alarmSlack
	if l.t == nil {
		l.t = time.NewTimer(wait)
		return
	}
	l.t.Reset(wait) // Go 1.23 timers: no stale value to drain
}

// C is the channel the loop waits on: nil (never ready) when not armed.
func (l *Alarm) C() <-chan time.Time {
	if l.t == nil || l.at.IsZero() {
		return nil
	}
	return l.t.C
}

// Fired records that the alarm fired: the check that follows arms it
// again.
func (l *Alarm) Fired() { l.at = time.Time{} }
