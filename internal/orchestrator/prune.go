package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/feature/prune"
	"github.com/corral-sched/corral/internal/store"
)

// History pruning (--keep-history) is the feature of package prune; here
// is what it reads and changes of the books.

// pruner is the pruning feature over this orchestrator's store and books.
func (o *Orchestrator) pruner() prune.Pruner {
	return prune.Pruner{Store: o.cfg.Store, Books: pruneBooks{o}, DataDir: o.cfg.DataDir, Log: o.log, Now: o.cfg.Now}
}

// PruneHistory deletes, now and then until ctx ends, the ended jobs that
// finished more than keep ago (prune.Pruner.Run). keep <= 0: it returns
// at once.
func (o *Orchestrator) PruneHistory(ctx context.Context, keep time.Duration) {
	o.pruner().Run(ctx, keep)
}

// PruneOnce deletes every ended job that finished before before and
// returns how many it deleted (prune.Pruner.Once).
func (o *Orchestrator) PruneOnce(ctx context.Context, before time.Time) (int, error) {
	return o.pruner().Once(ctx, before)
}

// pruneBooks is what pruning reads and changes of memory. Not the loop:
// each method takes the lock.
type pruneBooks struct{ o *Orchestrator }

func (b pruneBooks) DependedOn() []string {
	b.o.mu.RLock()
	defer b.o.mu.RUnlock()
	return b.o.deps.DependedOn()
}

// Forget takes pruned jobs out of the counts of ended jobs and the recent
// ring (finished.go).
func (b pruneBooks) Forget(gone []store.PrunedJob) {
	o := b.o
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range gone {
		o.gone.Pruned(p)
	}
}
