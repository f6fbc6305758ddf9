package deps

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// Store is what dependencies read of the store (the orchestrator's
// store is one): the jobs that ended and left memory, done arrays' tasks,
// and the ids a depends_on's prefix may mean. Each read is bounded by
// feature.StoreReadTimeout.
type Store interface {
	// Job reads an ended job: store.ErrNoJob when the store holds none.
	Job(ctx context.Context, id string) (api.Job, error)
	// FirstEnded reads the task of the done array id that ended first in
	// one of states: store.ErrNoJob when none did.
	FirstEnded(ctx context.Context, id string, states ...api.State) (api.Job, error)
	// DependencyIDs returns up to limit ids that a dependency naming
	// prefix may mean: arrays, and jobs that are not tasks of those
	// arrays.
	DependencyIDs(ctx context.Context, prefix string, limit int) ([]string, error)
}

// stored reads an ended job from the store: store.ErrNoJob when it holds
// none, or there is no store.
func (tr *Tracker) stored(id string) (api.Job, error) {
	if tr.store == nil {
		return api.Job{}, store.ErrNoJob
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	return tr.store.Job(ctx, id)
}

// firstEnded reads the task of the done array id that ended first in one
// of states: store.ErrNoJob when none did, or there is no store.
func (tr *Tracker) firstEnded(id string, states ...api.State) (api.Job, error) {
	if tr.store == nil {
		return api.Job{}, store.ErrNoJob
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	return tr.store.FirstEnded(ctx, id, states...)
}

// storedIDs returns up to limit ids from the store that a dependency
// naming prefix may mean; none when the read fails (logged) or there is
// no store.
func (tr *Tracker) storedIDs(prefix string, limit int) []string {
	if tr.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	ids, err := tr.store.DependencyIDs(ctx, prefix, limit)
	if err != nil {
		tr.log.Warn("look up dependency ids in the store", "prefix", prefix, "err", err)
	}
	return ids
}
