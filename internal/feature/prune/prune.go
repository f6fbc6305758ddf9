// Package prune is the feature that keeps the store's history bounded
// (--keep-history): ended jobs that finished longer ago than the kept
// time are deleted from the store, with their events, idempotency keys
// and log files, in small batches, so that the writer is never held for
// long. A job array goes whole, once it is done and its last task ended
// longer ago than the kept time. Jobs that waiting jobs depend on are
// kept. The run times learned from (the store's runs) that ended longer
// ago go too, but for the KeepRuns most recent, which the predictor reads
// back at start-up: a quiet cluster keeps what it learned.
//
// It runs beside the loop, not in it: it reads the books through its
// Books (which take the orchestrator's lock themselves) and deletes
// through its Store.
package prune

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// Batch is how many ended jobs one pruning transaction deletes.
const Batch = 500

// ArrayBatch is how many done arrays one pruning transaction deletes.
const ArrayBatch = 16

// Every is how often Run looks for ended jobs to delete.
const Every = 10 * time.Minute

// KeepRuns is how many of the most recent runs pruning never deletes:
// as many as the store loads for the predictor.
const KeepRuns = store.DefaultLoadRuns

// maxKeep bounds the ids a pruning query leaves out (one SQL parameter
// each; SQLite allows 32,766 in one statement).
const maxKeep = 30000

// Store deletes ended jobs and done arrays (*store.Store does).
type Store interface {
	PruneFinished(ctx context.Context, before time.Time, limit int, keep []string) ([]store.PrunedJob, error)
	PruneDoneArrays(ctx context.Context, before time.Time, limit int, keep []string) ([]store.PrunedJob, []string, error)
	PruneRuns(ctx context.Context, before time.Time, keep, limit int) (int, error)
}

// Books is what pruning reads and changes of the orchestrator's memory.
type Books interface {
	// DependedOn returns the ended jobs and arrays that waiting jobs
	// name in their depends_on: they are kept.
	DependedOn() []string
	// Forget takes pruned jobs out of the counts of ended jobs and of
	// what memory keeps of recently ended ones.
	Forget(gone []store.PrunedJob)
}

// Pruner deletes ended jobs.
type Pruner struct {
	Store Store
	Books Books
	// DataDir holds each job's logs under logs/ID; "" keeps no logs.
	DataDir string
	Log     *slog.Logger
	Now     func() time.Time
}

// Run deletes, now and then every Every until ctx ends, the ended jobs
// that finished more than keep ago. keep <= 0: it returns at once
// (history is kept for ever).
func (p Pruner) Run(ctx context.Context, keep time.Duration) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		if n, err := p.Once(ctx, p.Now().Add(-keep)); err != nil && ctx.Err() == nil {
			p.Log.Warn("ended jobs not pruned", "err", err)
		} else if n > 0 {
			p.Log.Info("ended jobs pruned", "deleted", n, "older_than", keep)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once deletes every ended job that finished before before, a batch at a
// time, and returns how many it deleted: plain jobs, then the done job
// arrays whose last task ended before before, whole (their tasks count
// in the number).
func (p Pruner) Once(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for _, arrays := range []bool{false, true} {
		for ctx.Err() == nil {
			keep := p.Books.DependedOn()
			if len(keep) > maxKeep {
				return total, fmt.Errorf("%d ended jobs are named by waiting jobs' depends_on, more than pruning can leave out (%d): pruning waits", len(keep), maxKeep)
			}
			var gone []store.PrunedJob
			var err error
			if arrays {
				gone, _, err = p.Store.PruneDoneArrays(ctx, before, ArrayBatch, arraysOf(keep))
			} else {
				gone, err = p.Store.PruneFinished(ctx, before, Batch, keep)
			}
			if err != nil {
				return total, err
			}
			if len(gone) == 0 {
				break
			}
			total += len(gone)
			p.forget(gone)
		}
	}
	runs, err := p.pruneRuns(ctx, before)
	if runs > 0 {
		p.Log.Info("learned run times pruned", "deleted", runs, "kept_at_least", KeepRuns)
	}
	if err != nil {
		return total, err
	}
	return total, ctx.Err()
}

// pruneRuns deletes the runs that ended before before, a batch at a
// time, but for the KeepRuns most recent, and returns how many it
// deleted.
func (p Pruner) pruneRuns(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := p.Store.PruneRuns(ctx, before, KeepRuns, Batch)
		total += n
		if err != nil || n < Batch {
			return total, err
		}
	}
	return total, nil
}

// arraysOf is keep with, for each array task it names (ARRAY_INDEX), its
// array: an array goes whole or stays whole.
func arraysOf(keep []string) []string {
	out := slices.Clone(keep)
	for _, id := range keep {
		if i := strings.LastIndexByte(id, '_'); i > 0 {
			out = append(out, id[:i])
		}
	}
	return out
}

// forget takes pruned jobs out of memory, and removes their logs.
func (p Pruner) forget(gone []store.PrunedJob) {
	p.Books.Forget(gone)
	if p.DataDir == "" {
		return
	}
	for _, g := range gone {
		if err := os.RemoveAll(filepath.Join(p.DataDir, "logs", g.ID)); err != nil {
			p.Log.Warn("remove a pruned job's logs", "job_id", g.ID, "err", err)
		}
	}
}
