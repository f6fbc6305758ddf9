package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// History pruning (--keep-history): ended jobs that finished longer ago
// than the kept time are deleted from the store, with their events,
// idempotency keys and log files, in small batches, so that the writer
// is never held for long. A job array goes whole, once it is done and its
// last task ended longer ago than the kept time.

// PruneBatch is how many ended jobs one pruning transaction deletes.
const PruneBatch = 500

// PruneEvery is how often PruneHistory looks for ended jobs to delete.
const PruneEvery = 10 * time.Minute

// PruneHistory deletes, now and then every PruneEvery until ctx ends,
// the ended jobs that finished more than keep ago. keep <= 0: it returns
// at once (history is kept for ever).
func (o *Orchestrator) PruneHistory(ctx context.Context, keep time.Duration) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(PruneEvery)
	defer t.Stop()
	for {
		if n, err := o.PruneOnce(ctx, o.cfg.Now().Add(-keep)); err != nil && ctx.Err() == nil {
			o.log.Warn("ended jobs not pruned", "err", err)
		} else if n > 0 {
			o.log.Info("ended jobs pruned", "deleted", n, "older_than", keep)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxPruneKeep bounds the ids a pruning query leaves out (one SQL
// parameter each; SQLite allows 32,766 in one statement).
const maxPruneKeep = 30000

// PruneOnce deletes every ended job that finished before before, a batch
// at a time, and returns how many it deleted: plain jobs, then the done
// job arrays whose last task ended before before, whole (their tasks
// count in the number).
func (o *Orchestrator) PruneOnce(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for _, arrays := range []bool{false, true} {
		for ctx.Err() == nil {
			o.mu.RLock()
			keep := o.deps.DependedOn() // ended jobs and arrays that waiting jobs name
			o.mu.RUnlock()
			if len(keep) > maxPruneKeep {
				return total, fmt.Errorf("%d ended jobs are named by waiting jobs' depends_on, more than pruning can leave out (%d): pruning waits", len(keep), maxPruneKeep)
			}
			var gone []store.PrunedJob
			var err error
			if arrays {
				gone, _, err = o.cfg.Store.PruneDoneArrays(ctx, before, PruneArrayBatch, arraysOf(keep))
			} else {
				gone, err = o.cfg.Store.PruneFinished(ctx, before, PruneBatch, keep)
			}
			if err != nil {
				return total, err
			}
			if len(gone) == 0 {
				break
			}
			total += len(gone)
			o.forgetPruned(gone)
		}
	}
	return total, ctx.Err()
}

// PruneArrayBatch is how many done arrays one pruning transaction deletes.
const PruneArrayBatch = 16

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

// forgetPruned takes pruned jobs out of the counts of ended jobs and the
// recent ring, and removes their logs.
func (o *Orchestrator) forgetPruned(gone []store.PrunedJob) {
	o.mu.Lock()
	for _, p := range gone {
		if o.gone.byState[p.State] > 0 {
			o.gone.byState[p.State]--
		}
		delete(o.gone.recent.byID, p.ID)
	}
	o.mu.Unlock()
	if o.cfg.DataDir == "" {
		return
	}
	for _, p := range gone {
		if err := os.RemoveAll(filepath.Join(o.cfg.DataDir, "logs", p.ID)); err != nil {
			o.log.Warn("remove a pruned job's logs", "job_id", p.ID, "err", err)
		}
	}
}
