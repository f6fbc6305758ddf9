package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Group commit. Every write (a Commit batch, audit entries, a token) is a
// function run inside a transaction. One goroutine, the committer, takes
// all writes waiting at that moment, runs them in one transaction and
// commits that once: one fsync for the lot, however many callers wrote
// concurrently. Each write still changes all or nothing (when one fails,
// the transaction is rolled back and run again with each write in its own
// savepoint, so that only the failing one is rolled back and only its
// caller gets the error), and no caller is answered before the COMMIT has
// returned, so an acknowledged write survives kill -9 and power loss
// (synchronous=FULL). A write's function may therefore run twice; it
// must depend on nothing but its own data and the transaction.
//
//	callers ──write(fn)──▶ reqs ──▶ committer: BEGIN; fn1; fn2; ...; COMMIT (one fsync) ──▶ answer each caller
//	                                 when fn2 fails: ROLLBACK, then
//	                                 BEGIN
//	                                 SAVEPOINT w; fn1; RELEASE w
//	                                 SAVEPOINT w; fn2 (fails); ROLLBACK TO w; RELEASE w
//	                                 ...
//	                                 COMMIT (one fsync) ──▶ answer each caller

// maxGroup bounds how many writes share one transaction.
const maxGroup = 1024

// ErrClosed is returned by writes to a closed store.
var ErrClosed = errors.New("the store is closed")

// writeReq is one write waiting for the committer.
type writeReq struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error
}

// startCommitter starts the goroutine that commits writes; Close stops it.
func (s *Store) startCommitter() {
	s.reqs = make(chan *writeReq, maxGroup)
	s.quit = make(chan struct{})
	s.stopped = make(chan struct{})
	go s.commitLoop()
}

// write runs fn in a transaction, grouped with the writes of concurrent
// callers, and returns once that transaction is durable (or has failed).
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	// The read lock keeps Close from stopping the committer between the
	// check and the send; the committer runs until Close, so a full
	// queue drains.
	s.closing.RLock()
	if s.closed {
		s.closing.RUnlock()
		return ErrClosed
	}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.closing.RUnlock()
		return ctx.Err()
	}
	s.closing.RUnlock()
	// Once queued, the write is waited for even when ctx ends: the caller
	// must learn whether it was committed.
	return <-r.done
}

func (s *Store) commitLoop() {
	defer close(s.stopped)
	group := make([]*writeReq, 0, maxGroup)
	for {
		select {
		case <-s.quit:
			// Writes queued before Close are answered, not lost silently;
			// none can be queued any more.
			for {
				select {
				case r := <-s.reqs:
					r.done <- ErrClosed
				default:
					return
				}
			}
		case r := <-s.reqs:
			group = append(group[:0], r)
		drain:
			for len(group) < maxGroup {
				select {
				case r := <-s.reqs:
					group = append(group, r)
				default:
					break drain
				}
			}
			s.commitGroup(group)
		}
	}
}

// commitGroup runs the group's writes in one transaction and answers each.
// It first runs them one after the other with no savepoint (a savepoint
// makes SQLite copy every page a write touches to its sub-journal): the
// common case, where every write succeeds, costs one plain transaction.
// When one fails, that transaction is rolled back, nothing of it having
// been committed, and the group is run again with a savepoint per write,
// so that the failing one fails alone.
func (s *Store) commitGroup(group []*writeReq) {
	errs := make([]error, len(group))
	failed, err := s.runGroup(group, errs, false)
	if err == nil && failed && len(group) > 1 {
		clear(errs)
		_, err = s.runGroup(group, errs, true)
	}
	for i, r := range group {
		if err != nil {
			r.done <- err
			continue
		}
		r.done <- errs[i]
	}
}

// runGroup runs the writes in one transaction, each in its own savepoint
// when isolate is set, and commits it unless one failed without one. It
// sets errs[i] to the error of write i, if any; failed reports whether one
// failed. err is an error of the transaction itself: nothing is
// committed, and every write gets it.
func (s *Store) runGroup(group []*writeReq, errs []error, isolate bool) (failed bool, err error) {
	ctx := context.Background() // one caller giving up must not abort the others' writes
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	if err := s.checkFence(ctx, tx); err != nil { // leaderlease.go
		tx.Rollback()
		return false, err
	}
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err // not started: nothing was written
			continue
		}
		if !isolate {
			if errs[i] = r.fn(ctx, tx); errs[i] != nil {
				// Nothing of this transaction is committed: the
				// caller runs the group again, isolating each write,
				// or, for a group of one, answers its error.
				tx.Rollback()
				return true, nil
			}
			continue
		}
		var fatal error
		if errs[i], fatal = s.inSavepoint(ctx, tx, r); fatal != nil {
			// The transaction cannot be trusted to hold exactly the
			// writes that succeeded: none of them is committed.
			tx.Rollback()
			return false, fmt.Errorf("commit: %w", fatal)
		}
		failed = failed || errs[i] != nil
	}
	if err := tx.Commit(); err != nil {
		return failed, fmt.Errorf("commit: %w", err)
	}
	return failed, nil
}

// inSavepoint runs one write so that, when it fails (err), none of it
// stays. fatal is an error of the savepoint itself: the transaction is
// unusable.
func (s *Store) inSavepoint(ctx context.Context, tx *sql.Tx, r *writeReq) (err, fatal error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return nil, err
	}
	if err := r.fn(ctx, tx); err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
			return err, rerr
		}
		if _, rerr := tx.ExecContext(ctx, "RELEASE w"); rerr != nil {
			return err, rerr
		}
		return err, nil
	}
	if _, err := tx.ExecContext(ctx, "RELEASE w"); err != nil {
		return nil, err
	}
	return nil, nil
}
