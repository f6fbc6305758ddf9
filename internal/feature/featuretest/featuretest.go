// Package featuretest is a fake of the orchestrator's loop as a
// feature's operations and timed work see it (feature.Loop,
// feature.Running, feature.Tx), for the feature packages' tests: no lock,
// no goroutine; each Do runs at once and its batch is committed to Store
// (a memstore, say) when one is given, and what was asked of the books
// is recorded.
package featuretest

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// Tx is a transaction: its time and its batch.
type Tx struct {
	At time.Time
	B  store.Batch
}

// Now is the transaction's time.
func (t *Tx) Now() time.Time { return t.At }

// Batch is what the commit writes.
func (t *Tx) Batch() *store.Batch { return &t.B }

// Stop is a stop asked of the loop (feature.Running.Stop).
type Stop struct {
	JobID  string
	Grace  time.Duration
	Notice string
}

// Move is a transition asked of the loop (feature.Loop.Transition).
type Move struct {
	JobID  string
	To     api.State
	Reason string
}

// Loop is a fake feature.Loop and feature.Running.
type Loop struct {
	Now   time.Time
	Store interface { // where each Do's batch is committed; nil: nowhere
		Commit(ctx context.Context, b *store.Batch) error
	}
	// Fail, when set, is Do's error before fn runs: the store is down and
	// nothing changes.
	Fail error
	Jobs []*api.Job // the running work (Active)

	Txs         []*Tx // each Do's transaction whose fn succeeded
	Dos, Reads  int
	Replans     int
	Touched     []string
	Moves       []Move
	Stops       []Stop
	BeforeReads []string
}

var (
	_ feature.Loop    = (*Loop)(nil)
	_ feature.Running = (*Loop)(nil)
)

// Do runs fn at once in a transaction of its own, committed to Store
// unless fn fails.
func (l *Loop) Do(ctx context.Context, fn func(tx feature.Tx) (any, error)) (any, error) {
	l.Dos++
	if l.Fail != nil {
		return nil, l.Fail
	}
	tx := &Tx{At: l.Now}
	v, err := fn(tx)
	if err != nil {
		return v, err
	}
	if l.Store != nil {
		if err := l.Store.Commit(ctx, &tx.B); err != nil {
			return nil, err
		}
	}
	l.Txs = append(l.Txs, tx)
	return v, nil
}

// Read runs fn.
func (l *Loop) Read(fn func()) { l.Reads++; fn() }

// BeforeRead records what was read from the store.
func (l *Loop) BeforeRead(what string) { l.BeforeReads = append(l.BeforeReads, what) }

// Touch records j.
func (l *Loop) Touch(_ feature.Tx, j *api.Job) { l.Touched = append(l.Touched, j.ID) }

// Replan counts.
func (l *Loop) Replan() { l.Replans++ }

// Transition moves j and records it.
func (l *Loop) Transition(tx feature.Tx, j *api.Job, to api.State, reason, message string) {
	j.Events = append(j.Events, api.Event{At: tx.Now(), From: j.State, To: to, Reason: reason, Message: message})
	j.State, j.Reason, j.Message = to, reason, message
	l.Moves = append(l.Moves, Move{JobID: j.ID, To: to, Reason: reason})
}

// Running is the loop itself.
func (l *Loop) Running(context.Context) feature.Running { return l }

// Active yields Jobs.
func (l *Loop) Active() iter.Seq[*api.Job] { return slices.Values(l.Jobs) }

// Stop records the stop.
func (l *Loop) Stop(_ feature.Tx, j *api.Job, grace time.Duration, notice, _ string) {
	l.Stops = append(l.Stops, Stop{JobID: j.ID, Grace: grace, Notice: notice})
}
