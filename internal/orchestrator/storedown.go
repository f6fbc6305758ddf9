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

// commitRetrying commits tx's batch, and while the store fails, tries
// again until it succeeds or ctx ends (then it returns the error,
// wrapping ErrStore). The write lock is held on entry and on return,
// released while it waits. Before Run (recovery in New), a failure is
// returned at once.
//
// Only a failure of the moment is retried. One that writing the same
// batch again cannot fix (store.Permanent: a row the store cannot
// encode, a constraint) would fail every try and wedge the loop: the
// rows at fault are left out instead and the rest is written
// (commitWithout); the ops that made them are answered with an error.
func (o *Orchestrator) commitRetrying(ctx context.Context, tx *txn) error {
	b := &tx.batch
	err := o.cfg.Log.Commit(ctx, b)
	if err == nil {
		return nil
	}
	if !o.health.looping {
		return fmt.Errorf("%w: %w", ErrStore, err) // New: no one holds the lock, and the start fails
	}
	if store.Permanent(err) {
		if err = o.commitWithout(ctx, tx, err); err == nil {
			return nil
		}
	}
	why := fmt.Sprintf("%v: %v", ErrStore, err)
	o.health.down.Store(&why)
	close(*o.health.sig.Load()) // callers of this batch learn it (await)
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
		err = o.cfg.Log.Commit(ctx, b)
		if store.Permanent(err) {
			err = o.commitWithout(ctx, tx, err)
		}
		if err == nil {
			o.health.sig.Store(new(make(chan struct{})))
			o.health.down.Store(nil)
			o.log.Info("the store writes again", "down_for", time.Since(began).Round(time.Millisecond))
			return nil
		}
		pause = min(2*pause, storeRetryMax)
	}
}

// commitWithout handles a commit the store refused for good (err): it
// finds the rows of the batch the store cannot write, notes the ops that
// made them as refused (applyOps answers them with unstorableError),
// leaves those rows out and commits the rest. A batch refused for good
// with no row at fault found, or still refused without them, is given
// up: its ops are refused, and the loop goes on. It returns an error
// only for a failure of the moment (the caller retries). Either way the
// changes refused stay in memory (the ops applied them before the
// commit) until the server restarts; door checks (api/bounds.go) keep
// requests from making such rows at all.
func (o *Orchestrator) commitWithout(ctx context.Context, tx *txn, err error) error {
	for try := 0; try < 2; try++ {
		bad := tx.batch.Unstorable()
		if len(bad) == 0 {
			break
		}
		for _, r := range bad {
			tx.refuse(tx.ownerOf(r), r.Err)
		}
		o.log.Error("the store cannot write some rows of a batch, whatever it retries: they are left out and their changes refused",
			"rows", len(bad), "part", bad[0].Part.String(), "key", bad[0].Key, "err", bad[0].Err)
		tx.batch.Drop(bad)
		if err = o.cfg.Log.Commit(ctx, &tx.batch); err == nil || !store.Permanent(err) {
			return err
		}
	}
	o.log.Error("the store refused a batch for a reason a retry cannot fix, and no row of it is at fault: it is not written; its changes hold in memory only, until a restart",
		"err", err)
	for i := range tx.marks {
		tx.refuse(i, err)
	}
	return nil
}

// ownerOf returns the op of tx that made row r, -1 when none did (a row
// the commit itself added, or a batch made by no op).
func (tx *txn) ownerOf(r store.BadRow) int {
	if r.Part == store.PartJobs {
		if i, ok := tx.jobBy[r.Key]; ok {
			return i
		}
		return -1
	}
	for i, m := range tx.marks {
		if r.Index < m[r.Part] {
			return i
		}
	}
	return -1
}

// refuse notes that op i's change could not be stored (i < 0: no op).
func (tx *txn) refuse(i int, why error) {
	if i < 0 {
		return
	}
	if tx.refused == nil {
		tx.refused = map[int]error{}
	}
	if _, ok := tx.refused[i]; !ok {
		tx.refused[i] = why
	}
}

// unstorableError is the answer to an op whose change the store refused
// for good.
func unstorableError(why error) error {
	return &api.Error{Status: 500, Code: "unstorable",
		Message: "this change could not be stored, and a retry cannot fix it: it is refused (it will not survive a restart of the server): " + why.Error()}
}

// await waits for a queued op's result. When ctx ends first, or the store
// stops writing first, an op not yet taken is abandoned (nothing changed:
// ctx.Err(), or storeDownError). An op already taken is in the batch
// being committed: after ctx, do waits for its outcome, as ever; while
// the store cannot write, the outcome is unknown until it can (the batch
// is written then), and the caller gets 503 store_unavailable saying so.
func (o *Orchestrator) await(ctx context.Context, p *op) (any, error) {
	down := *o.health.sig.Load()
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
	why := o.health.down.Load()
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
