// Package feature names the moments of the orchestrator's loop that a
// feature of the scheduler can serve, in the manner of the Kubernetes
// scheduler framework's extension points. A feature (arrays, bookings,
// budgets, notifications, ...) implements the interfaces of the moments
// it cares about; the orchestrator's features.go lists every feature in
// one order, and the loop calls them at each moment in that order. A
// feature is handed a transaction (Tx) or the snapshot, never the
// orchestrator's lock, and changes only its own state.
//
// Where the loop is at each moment:
//
//	submit:     validate ─▶ SubmitCheck... ─▶ queued
//	transition: event, queue and GPU books ─▶ Mover...
//	commit:     Committer.BeforeCommit... ─▶ store ─▶ Committer.Committed...
//	cycle:      queue ─▶ Eligibility... ─▶ snapshot + SnapshotPart... ─▶ QueueGate... ─▶ sched.Schedule ─▶ starts
//	tick:       nodes' silence ─▶ Ticker, TxTicker and RunningTicker...
//	recovery:   jobs ─▶ Loader... ─▶ holds, adoption
//
// A feature's API operations (a budget set, a booking made, an array's
// throttle changed) are its own too: they reach the loop through Loop
// (loop.go), a change as one op of its transaction, a read under its
// read lock.
//
// This package holds only the interfaces and the values they pass, so
// that a feature's package and the orchestrator both import it and
// neither imports the other.
package feature

import (
	"context"
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Tx is the loop's open transaction as a feature sees it: the batch its
// rows join, and the time of the batch.
type Tx interface {
	// Now is the transaction's time (the clock read once per batch).
	Now() time.Time
	// Batch is what the commit will write: a feature adds its rows.
	Batch() *store.Batch
}

// Submission is a job being admitted: validated, with no id yet.
type Submission struct {
	Job     *api.Job // checks may fill in what they own of it (a budget's hold, say)
	Request *api.SubmitRequest
	// Array is set when the submission makes a job array of Tasks tasks;
	// Job is then the template every task is made from.
	Array bool
	Tasks int
	// Exempt: an admin's submission, outside the per-user limits.
	Exempt bool
	Now    time.Time
}

// A SubmitCheck admits or refuses a new job. A refusal changes nothing:
// the checks run before the job exists anywhere but in the Submission.
type SubmitCheck interface {
	CheckSubmit(s *Submission) error
}

// A Mover follows jobs from state to state: it is called once per
// transition, after the queue and GPU books have moved, with the
// transition's event (e.From is "" for a new job). It must be quick: a
// busy cluster makes thousands of transitions a second.
type Mover interface {
	Moved(tx Tx, j *api.Job, e api.Event)
}

// A Committer writes rows that follow from the batch's changes inside
// the same commit (BeforeCommit: an outbox row for each event, say), and
// acts once they are durable (Committed: wake a sender, drop what memory
// need not keep).
type Committer interface {
	BeforeCommit(tx Tx)
	Committed(tx Tx)
}

// An Eligibility keeps queued jobs out of the cycle until they may run
// (their dependencies not met, say): before the snapshot is taken,
// Eligible returns the jobs of queue that may be scheduled, in queue's
// order; the next Eligibility sees only those. It may end in tx a job
// that never will run. The slice it returns may be queue itself, or one
// it reuses at its next call.
type Eligibility interface {
	Eligible(tx Tx, queue []*api.Job) []*api.Job
}

// A SnapshotPart adds its data to the core's snapshot: blocked intervals,
// caps, GPUs held outside the queue. The core sees constraints only as
// data.
type SnapshotPart interface {
	AddToSnapshot(snap *sched.Snapshot, now time.Time)
}

// A QueueGate marks queued jobs of the whole snapshot (arrays' waiting
// tasks included) that must not start now, setting their Held reason and
// HeldNote: a budget that ran out holds its user's work, say. The jobs
// stay in the queue, in their order; the core skips them and says why.
type QueueGate interface {
	GateQueue(queue []sched.Job, now time.Time)
}

// A Ticker does a feature's timed work once per tick (expiries, idle
// reclaim, heartbeats); it makes its own transaction when it changes
// anything.
type Ticker interface {
	Tick(ctx context.Context)
}

// A TxTicker does a feature's timed work once per tick in a transaction
// of the loop's own, in its place among the Tickers: the loop takes its
// lock, begins the transaction and calls TickTx. When TickTx reports that
// it did work, and the batch has rows or notifications wait to be
// written, the loop commits it and then makes the executor's calls it
// brought; a failed commit is logged under TickName.
type TxTicker interface {
	TickTx(tx Tx) bool
	TickName() string
}

// A RunningTicker does a feature's timed work on the running jobs (time
// limits, idle reclaim) once per tick, in a transaction of the loop's
// own, in its place among the Tickers: the loop takes its lock, begins
// the transaction and calls TickRunning with the running work as this
// tick sees it. When TickRunning reports true, the loop commits the
// transaction and then makes the stops it asked for (Running.Stop); a
// failed commit is logged under TickName.
type RunningTicker interface {
	TickRunning(tx Tx, run Running) bool
	TickName() string
}

// A Loader puts its feature's state back in memory from what the store
// loaded, once, when the orchestrator recovers, before the loop starts.
// It is called after the jobs are back, in registration order.
type Loader interface {
	Load(st *store.State)
}

// Running is the running work as a feature's timed work sees it (time
// limits, idle reclaim): the jobs holding GPUs, and what the feature may
// ask the loop to do with them in its transaction. Only the loop calls
// the executor; Stop asks it to, once the transaction is committed.
type Running interface {
	// Active yields the jobs holding GPUs (scheduled, allocating,
	// running), in no order.
	Active() iter.Seq[*api.Job]
	// Touch marks j changed in tx, so that its row is written.
	Touch(tx Tx, j *api.Job)
	// Stop stops j's current attempt once tx is committed: the notice
	// first when there is one (where the executor writes notices), then
	// SIGTERM, grace, SIGKILL. failed is what the log says when the
	// executor fails to stop it.
	Stop(tx Tx, j *api.Job, grace time.Duration, notice, failed string)
}
