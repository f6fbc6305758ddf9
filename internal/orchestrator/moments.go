package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// The moments of the loop a feature can serve, in the manner of the
// Kubernetes scheduler framework's extension points. A feature (arrays,
// bookings, budgets, notifications, ...) implements the interfaces of
// the moments it cares about; features.go lists the features in one
// order, and the loop calls them at each moment in that order. A feature
// is handed a transaction (Tx) or the snapshot, never the lock, and
// changes only its own state.
//
// Where the loop is at each moment:
//
//	submit:     validate ─▶ SubmitCheck... ─▶ queued
//	transition: event, queue and GPU books ─▶ Mover...
//	commit:     Committer.BeforeCommit... ─▶ store ─▶ Committer.Committed...
//	cycle:      eligible jobs ─▶ snapshot + SnapshotPart... ─▶ sched.Schedule ─▶ starts
//	tick:       nodes' silence ─▶ Ticker...

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

// A SnapshotPart adds its data to the core's snapshot: blocked intervals,
// caps, GPUs held outside the queue. The core sees constraints only as
// data.
type SnapshotPart interface {
	AddToSnapshot(snap *sched.Snapshot, now time.Time)
}

// A Ticker does a feature's timed work once per tick (expiries, idle
// reclaim, heartbeats); it makes its own transaction when it changes
// anything.
type Ticker interface {
	Tick(ctx context.Context)
}

// Now and Batch make txn a Tx.
func (tx *txn) Now() time.Time      { return tx.now }
func (tx *txn) Batch() *store.Batch { return &tx.batch }

// ownTxn is the loop's transaction behind a Tx, for the features still
// inside this package: they reach past Tx into the shared books until
// they move out to packages of their own.
func ownTxn(t Tx) *txn { return t.(*txn) }

// moments holds the registered features by the moments they serve, each
// list in registration order. Built once by New.
type moments struct {
	submit   []SubmitCheck
	movers   []Mover
	commit   []Committer
	snapshot []SnapshotPart
	tick     []Ticker
}

// register sorts features into the moments they serve.
func (m *moments) register(features []any) {
	for _, f := range features {
		if c, ok := f.(SubmitCheck); ok {
			m.submit = append(m.submit, c)
		}
		if c, ok := f.(Mover); ok {
			m.movers = append(m.movers, c)
		}
		if c, ok := f.(Committer); ok {
			m.commit = append(m.commit, c)
		}
		if c, ok := f.(SnapshotPart); ok {
			m.snapshot = append(m.snapshot, c)
		}
		if c, ok := f.(Ticker); ok {
			m.tick = append(m.tick, c)
		}
	}
}

// admit runs the submission through every SubmitCheck, in order; the
// first refusal is the answer.
func (m *moments) admit(s *Submission) error {
	for _, c := range m.submit {
		if err := c.CheckSubmit(s); err != nil {
			return err
		}
	}
	return nil
}
