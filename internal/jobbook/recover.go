package jobbook

import (
	"fmt"
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// What a restart makes of each job the store holds, and of an attempt
// that no agent ever ran. These are rules over the job alone: the
// orchestrator's recovery loads the books in its order, asks these rules
// job by job, and makes the transitions, the commit and the executor's
// calls itself.

// Fate is what a restart makes of a job loaded from the store.
type Fate int

const (
	// Stays: an ended job stays as stored.
	Stays Fate = iota
	// Queue: a queued job goes back to the queue.
	Queue
	// Adopt: an active job whose agent may still run it is adopted; the
	// agent reports it running or ended.
	Adopt
	// Lost: an active job no agent can be asked about died with the
	// previous server (Settle says what it becomes).
	Lost
)

// Recovered is the fate of job j at a restart. canAdopt: the executor
// can adopt work (exec.Adopter); only: the cluster's one node, when a job
// of no GPUs stored without its node can run nowhere else (else "").
// An active job is adopted when the executor can adopt and its place is
// known: its GPUs, or for a job of no GPUs its node (or the one node).
func Recovered(j *api.Job, canAdopt bool, only string) Fate {
	switch {
	case j.State == api.StateQueued:
		return Queue
	case !j.State.Active():
		return Stays
	case canAdopt && (len(j.Allocation) > 0 || j.GPUCount == 0 && (j.NodeID != "" || only != "")):
		return Adopt
	default:
		return Lost
	}
}

// Placements is where an adopted job runs: its GPUs, or for a job of no
// GPUs the node it was placed on (only, the cluster's one node, when a
// server that did not record the node stored it).
func Placements(j *api.Job, only string) []sched.Placement {
	if ps := sched.PlacementsOf(j.Allocation); len(ps) > 0 {
		return ps
	}
	node := j.NodeID
	if node == "" {
		node = only
	}
	return []sched.Placement{{NodeID: node, GPUs: []int{}}}
}

// Settle is a job's transition when its attempt ends without a report of
// its own: the job goes to State with Reason and Detail. Ended: it ends
// now (FinishedAt is set before the transition). Retry: a retry is
// counted before the transition. NotBefore (when not zero): the job
// starts no sooner, set before the transition. Reset: the attempt is
// reset after it (api.Job.ResetAttempt), the job being back in the queue.
type Settle struct {
	State     api.State
	Reason    string
	Detail    string
	Ended     bool
	Retry     bool
	NotBefore time.Time
	Reset     bool
}

// retriesLeft reports whether a lost attempt of j may be retried:
// preemptions do not count against max_retries.
func retriesLeft(j *api.Job) bool { return j.RetryCount-j.Preemptions < j.MaxRetries }

// BackoffMax caps the wait before a lost job's next attempt (LostAttempt).
const BackoffMax = 10 * time.Minute

// LostAttempt is what a job whose attempt's processes are gone (its node was
// lost, or its agent came back without it) becomes, with reason, why
// saying how: requeued while retries remain, to start no sooner than a
// wait of base doubling per retry and capped at BackoffMax (a node or
// agent that failed may fail again); else failed.
func LostAttempt(j *api.Job, why, reason string, base time.Duration, now time.Time) Settle {
	if !retriesLeft(j) {
		return Settle{State: api.StateFailed, Reason: reason, Ended: true,
			Detail: fmt.Sprintf("%s; no retries left (max_retries %d)", why, j.MaxRetries)}
	}
	retry := j.RetryCount - j.Preemptions + 1
	wait := min(base<<(retry-1), BackoffMax)
	return Settle{State: api.StateQueued, Reason: reason, Retry: true, NotBefore: now.Add(wait), Reset: true,
		Detail: fmt.Sprintf("%s; requeued (retry %d of %d) to start no sooner than in %s", why, retry, j.MaxRetries, wait)}
}

// LostWithServer is what a job that was active when the last server
// stopped, and that no agent adopts, becomes: a job being stopped at its
// time limit fails with time_limit, one being canceled is canceled, any
// other is requeued while retries remain (preemptions do not count) and
// else fails as lost.
func LostWithServer(j *api.Job) Settle {
	switch {
	case j.TimedOut:
		return Settle{State: api.StateFailed, Reason: api.ReasonTimeLimit, Ended: true,
			Detail: "ran past its time limit; the server stopped while it was being stopped"}
	case j.CancelRequested:
		return Settle{State: api.StateCanceled, Reason: api.ReasonCanceled, Ended: true,
			Detail: "the server stopped while the job was being canceled"}
	case retriesLeft(j):
		return Settle{State: api.StateQueued, Reason: api.ReasonLost, Retry: true, Reset: true,
			Detail: fmt.Sprintf("the server stopped while the job was %s; requeued (retry %d of %d)", j.State, j.RetryCount+1-j.Preemptions, j.MaxRetries)}
	default:
		return Settle{State: api.StateFailed, Reason: api.ReasonLost, Ended: true,
			Detail: fmt.Sprintf("the server stopped while the job was %s; no retries left (max_retries %d)", j.State, j.MaxRetries)}
	}
}

// Unstarted is what a job becomes whose attempt no agent ever ran (every
// node it was placed on came back without it), when it was not yet known
// to run: adopted after a restart while scheduled or allocating, or
// placed just before its agent restarted. It goes back to the queue
// without counting a retry, and keeps its attempt number: no process of
// that attempt exists, nor a record of it on any node. ok is false for a
// job that ran, or that is being canceled or stopped at its time limit:
// those end as a lost attempt does.
func Unstarted(j *api.Job) (s Settle, ok bool) {
	if j.State == api.StateRunning || j.CancelRequested || j.TimedOut {
		return Settle{}, false
	}
	return Settle{State: api.StateQueued, Reason: api.ReasonRequeued, Reset: true,
		Detail: fmt.Sprintf("its node came back without it while it was %s (it never started); requeued without counting a retry", j.State)}, true
}

// Learn adds the jobs' recorded GPU time to the fair-share ledger (each
// counted at the job's latest event) and their run times, those that
// completed, to the estimator: the part of both that the jobs in memory
// hold (ended jobs are the store's, counted apart).
func Learn(jobs iter.Seq[*api.Job], l *sched.Ledger, e *sched.Estimator) {
	for j := range jobs {
		if j.GPUSeconds > 0 && len(j.Events) > 0 {
			l.Add(j.User, j.Project, j.GPUSeconds, j.Events[len(j.Events)-1].At)
		}
		if j.State == api.StateCompleted && j.StartedAt != nil && j.FinishedAt != nil {
			e.Observe(j.User, j.FinishedAt.Sub(*j.StartedAt))
		}
	}
}
