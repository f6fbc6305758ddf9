package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// When the store cannot write (its disk is full, say), the server keeps
// running. The loop has already applied the batch in memory, so it keeps
// the batch and writes it again, with a growing pause, until it is
// durable; meanwhile:
//
//   - the callers whose changes are in the batch wait for it, and learn
//     the outcome once it is durable (or 503 if the server stops first);
//   - new changes are refused at once with 503 store_unavailable, and
//     change nothing;
//   - reads go on (the lock is released between tries), and show the
//     batch's changes;
//   - no new scheduling cycle runs and no job starts: the loop waits.
//
// Once a write succeeds, everything resumes where it was.

// Pauses between tries of a failed commit.
const (
	storeRetryFirst = 100 * time.Millisecond
	storeRetryMax   = 5 * time.Second
)

// commitRetrying commits b, and while the store fails, tries again until
// it succeeds or ctx ends (then it returns the error, wrapping ErrStore).
// The write lock is held on entry and on return, released while it waits.
// Before Run (recovery in New), a failure is returned at once.
func (o *Orchestrator) commitRetrying(ctx context.Context, b *store.Batch) error {
	err := o.cfg.Store.Commit(ctx, b)
	if err == nil {
		return nil
	}
	if !o.looping {
		return fmt.Errorf("%w: %w", ErrStore, err) // New: no one holds the lock, and the start fails
	}
	why := fmt.Sprintf("%v: %v", ErrStore, err)
	o.storeDown.Store(&why)
	close(*o.downSig.Load()) // callers of this batch learn it (await)
	o.log.Error("the store cannot write; changes are refused until it can (is its disk full?)", "err", err)
	began := time.Now()
	pause := storeRetryFirst
	for {
		o.mu.Unlock()
		waited := sleepCtx(ctx, pause)
		o.mu.Lock()
		if !waited {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		if err = o.cfg.Store.Commit(ctx, b); err == nil {
			o.downSig.Store(new(make(chan struct{})))
			o.storeDown.Store(nil)
			o.log.Info("the store writes again", "down_for", time.Since(began).Round(time.Millisecond))
			return nil
		}
		pause = min(2*pause, storeRetryMax)
	}
}

// await waits for a queued op's result. When ctx ends first, or the store
// stops writing first, an op not yet taken is abandoned (nothing changed:
// ctx.Err(), or storeDownError). An op already taken is in the batch
// being committed: after ctx, do waits for its outcome, as ever; while
// the store cannot write, the outcome is unknown until it can (the batch
// is written then), and the caller gets 503 store_unavailable saying so.
func (o *Orchestrator) await(ctx context.Context, p *op) (any, error) {
	down := *o.downSig.Load()
	for {
		select {
		case r := <-p.done:
			return r.v, r.err
		case <-ctx.Done():
			if p.state.CompareAndSwap(opQueued, opAbandoned) {
				return nil, ctx.Err()
			}
			ctx = context.WithoutCancel(ctx) // wait on; the store may still go down
		case <-down:
			if p.state.CompareAndSwap(opQueued, opAbandoned) {
				return nil, o.storeDownError()
			}
			select {
			case r := <-p.done:
				return r.v, r.err
			default:
			}
			return nil, &api.Error{Status: 503, Code: "store_unavailable",
				Message: "the store cannot write (is the data dir's disk full?); this change was made in memory and is written once it can, " +
					"so its outcome is unknown until then: retry with the same Idempotency-Key to learn it"}
		}
	}
}

// storeDownError is the error a change gets while the store cannot write;
// nil when it can.
func (o *Orchestrator) storeDownError() error {
	why := o.storeDown.Load()
	if why == nil {
		return nil
	}
	return &api.Error{Status: 503, Code: "store_unavailable",
		Message: "the store cannot write (is the data dir's disk full?); nothing was changed, try again later: " + *why}
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
