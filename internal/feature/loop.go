package feature

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// Loop is what a feature's API operations need of the orchestrator's
// loop. The API calls an operation from any goroutine; the operation
// checks its request, then reaches the feature's state only through the
// loop: a change as one op of the loop's next transaction, answered once
// it is durable; a read under the read lock. The feature never holds the
// lock itself, and a change it makes of the shared books (a job moved, a
// stop sent) it asks of the loop in the transaction (Running, or the
// feature's own small interface, which the orchestrator implements).
type Loop interface {
	// Do runs fn in the loop's next transaction, with the write lock
	// held, and returns what fn returned once the transaction is durable.
	// When ctx ends first, fn either never runs (Do returns ctx.Err():
	// nothing changed) or Do waits for its result. While the store
	// cannot write, Do is refused at once and fn never runs.
	Do(ctx context.Context, fn func(tx Tx) (any, error)) (any, error)
	// Read runs fn with the read lock held: memory does not change while
	// it runs. fn must not block (no store read, no I/O).
	Read(fn func())
	// BeforeRead runs before each store read an operation makes without
	// the lock (a test's hook checks that no lock is held); what names
	// the read.
	BeforeRead(what string)

	// What an operation asks of the loop inside Do's fn, in its
	// transaction (the write lock held):

	// Touch marks j changed in tx, so that its row is written.
	Touch(tx Tx, j *api.Job)
	// Transition moves j to state to in tx, with its event: the queue
	// and GPU books follow, and every Mover is told.
	Transition(tx Tx, j *api.Job, to api.State, reason, message string)
	// Replan marks a scheduling cycle due: what may start has changed.
	Replan()
	// Running is the running work, whose stops (Running.Stop) the loop
	// makes once tx is committed, with ctx's values (not its end).
	Running(ctx context.Context) Running
}

// Do is Loop.Do for an fn of one result type: its value once durable,
// or the zero value and the error.
func Do[T any](ctx context.Context, l Loop, fn func(tx Tx) (T, error)) (T, error) {
	v, err := l.Do(ctx, func(tx Tx) (any, error) {
		r, err := fn(tx)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// Read is Loop.Read for an fn that returns a value.
func Read[T any](l Loop, fn func() T) T {
	var v T
	l.Read(func() { v = fn() })
	return v
}

// GPUs is what an operation that takes GPUs outside the queue (a hold)
// asks of the loop's GPU books, in its transaction (the write lock held).
type GPUs interface {
	// Place is the core's answer for j alone on the cluster as it is at
	// tx's time: first come, first served, on the GPUs free now, kept off
	// GPUs booked within j's time limit. It changes nothing.
	Place(tx Tx, j sched.Job) sched.Result
	// Allocate gives the GPUs of placements to id (user's) in the books
	// and returns them as the API's allocation (gpubook.Book.Allocate).
	Allocate(id, user string, ps []sched.Placement) []api.Allocation
}
