package limits

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
)

// Noter is what the time limits tell the notifications feature
// (*notes.Notes is one).
type Noter interface {
	// TimeWarning warns a running job once per attempt when most of its
	// time limit is used.
	TimeWarning(j *api.Job, now time.Time)
	// Job notes a job's notification of kind k.
	Job(j *api.Job, k notify.Kind, at time.Time)
}

// TimeLimits stops every running attempt past its time limit, like a
// cancel: SIGTERM, the cancel grace, SIGKILL; the job then ends failed
// with reason time_limit (the loop's exit outcome reads TimedOut).
type TimeLimits struct {
	Running feature.Running
	Notes   Noter
	Grace   time.Duration // the cancel grace
	// Arm wakes the loop at due (plus a little), the earliest limit not
	// yet reached, so that a job is stopped at its limit rather than at
	// the next tick after it.
	Arm func(due, now time.Time)
	Log *slog.Logger
}

// Check looks at each running attempt at now, in tx: a warning once most
// of its time is used, and past its limit, the stop.
func (t TimeLimits) Check(tx feature.Tx, now time.Time) {
	for j := range t.Running.Active() {
		if j.TimeLimit == nil || j.StartedAt == nil || j.TimedOut || j.CancelRequested || j.State != api.StateRunning {
			continue
		}
		t.Notes.TimeWarning(j, now)
		if now.Sub(*j.StartedAt) <= j.TimeLimit.Duration() {
			t.Arm(j.StartedAt.Add(j.TimeLimit.Duration()), now)
			continue
		}
		j.TimedOut = true
		t.Running.Touch(tx, j)
		t.Notes.Job(j, notify.JobTimeLimit, now)
		t.Running.Stop(tx, j, t.Grace, "", "stop job past its time limit")
		t.Log.Info("job past its time limit; stopping it", "job_id", j.ID, "time_limit", j.TimeLimit.Duration())
	}
}

// Timer is the time limits' timed work (feature.RunningTicker): Check,
// each tick and when the earliest limit is due, in a transaction of the
// loop's, over the running work of that tick.
type Timer struct {
	Notes Noter
	Grace time.Duration // the cancel grace
	// Arm wakes the loop at the earliest limit not yet reached
	// (TimeLimits.Arm).
	Arm func(due, now time.Time)
	Now func() time.Time // the orchestrator's clock, read at each check
	Log *slog.Logger
}

// TickRunning checks the running work run at Now. It reports true
// whether or not a job changed: the tick's transaction is always
// committed, and the commit's features run (ended jobs leave memory).
func (t Timer) TickRunning(tx feature.Tx, run feature.Running) bool {
	TimeLimits{Running: run, Notes: t.Notes, Grace: t.Grace, Arm: t.Arm, Log: t.Log}.Check(tx, t.Now())
	return true
}

// TickName names the time limits' tick in the log.
func (t Timer) TickName() string { return "time limits" }

// Outcome is how a job stopped at its time limit ends.
func Outcome(j *api.Job, code int) (api.State, string, string) {
	return api.StateFailed, api.ReasonTimeLimit, fmt.Sprintf("ran past its time limit of %s and was stopped (exit code %d)", limitText(j.TimeLimit), code)
}

// limitText is a time limit as the outcome's message says it.
func limitText(s *api.Seconds) string {
	if s == nil {
		return "?"
	}
	return s.Duration().String()
}
