package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Group commit. Every write (a Commit batch, audit entries, a token) is a
// function run inside a transaction. One goroutine, the committer, takes
// all writes waiting at that moment, runs each in its own savepoint of one
// transaction and commits that once: one fsync for the lot, however many
// callers wrote concurrently. Each write still changes all or nothing (a
// failing one is rolled back to its savepoint and only its caller gets the
// error), and no caller is answered before the COMMIT has returned, so an
// acknowledged write survives kill -9 and power loss (synchronous=FULL).
//
//	callers ──write(fn)──▶ reqs ──▶ committer: BEGIN
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
func (s *Store) commitGroup(group []*writeReq) {
	errs := make([]error, len(group))
	ctx := context.Background() // one caller giving up must not abort the others' writes
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range group {
			r.done <- err
		}
		return
	}
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err // not started: nothing was written
			continue
		}
		var fatal error
		if errs[i], fatal = s.inSavepoint(ctx, tx, r); fatal != nil {
			// The transaction cannot be trusted to hold exactly the
			// writes that succeeded: none of them is committed.
			tx.Rollback()
			for _, r := range group {
				r.done <- fmt.Errorf("commit: %w", fatal)
			}
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, r := range group {
			r.done <- fmt.Errorf("commit: %w", err)
		}
		return
	}
	for i, r := range group {
		r.done <- errs[i]
	}
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
