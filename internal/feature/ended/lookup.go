package ended

import (
	"context"
	"errors"
	"iter"
	"log/slog"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// Live is what a lookup reads of the live books: a job by id, the jobs
// holding GPUs, the job or array an idempotency key submitted.
// jobbook.Book is one.
type Live interface {
	Get(id string) *api.Job
	Active() iter.Seq[*api.Job]
	Key(key string) (string, bool)
}

// Store is what a lookup reads of the store once memory no longer holds
// a job: the job with its events (store.ErrNoJob when there is none), and
// the job a key submitted.
type Store interface {
	Job(ctx context.Context, id string) (api.Job, error)
	IdempotentJob(ctx context.Context, key string) (string, bool, error)
}

// Finder finds a job wherever it is: in the live books, among the
// recently ended (Gone), or in the store. It locks nothing: its caller
// holds the lock that guards Live and Gone.
type Finder struct {
	Live  Live
	Gone  *Books
	Store Store        // nil: none (a bare orchestrator of a unit test)
	Log   *slog.Logger // a store that cannot be read is logged here
}

// Lookup returns a job from memory: a live one, or one of the recently
// ended (maybe a slim copy: Books.Slim).
func (f Finder) Lookup(id string) (*api.Job, bool) {
	if j := f.Live.Get(id); j != nil {
		return j, true
	}
	return f.Gone.Get(id)
}

// Stored reads an ended job (with its events) from the store, bounded by
// feature.StoreReadTimeout: store.ErrNoJob when there is none.
func (f Finder) Stored(id string) (api.Job, error) {
	if f.Store == nil {
		return api.Job{}, store.ErrNoJob
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	return f.Store.Job(ctx, id)
}

// LookupAny returns a whole job from memory or else the store; false when
// neither holds it (or the store cannot be read: logged).
func (f Finder) LookupAny(id string) (*api.Job, bool) {
	if j, ok := f.Lookup(id); ok && !f.Gone.Slim(id) {
		return j, true
	}
	j, err := f.Stored(id)
	if err != nil {
		if !errors.Is(err, store.ErrNoJob) {
			f.Log.Warn("read an ended job from the store", "job_id", id, "err", err)
		}
		return nil, false
	}
	return &j, true
}

// EndedError is the error for a change asked of a job that the live
// books no longer hold: 409 wrong_state when it ended, else 404.
func (f Finder) EndedError(id string) error {
	if j, ok := f.LookupAny(id); ok && j.State.Terminal() {
		return api.Conflict("wrong_state", "job %s is already %s", id, j.State)
	}
	return api.NotFound("no job %q", id)
}

// Submitted returns the job or array that a submission under key made:
// from memory, else from the store (the keys of ended jobs leave memory).
func (f Finder) Submitted(key string) (string, bool) {
	if id, ok := f.Live.Key(key); ok {
		return id, true
	}
	if f.Store == nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	id, ok, err := f.Store.IdempotentJob(ctx, key)
	if err != nil {
		f.Log.Warn("look up an idempotency key in the store", "err", err)
	}
	return id, ok
}

// Started yields the jobs in memory that may have started: the active
// ones and the recently ended (a queued job has no start: a requeue
// clears it).
func (f Finder) Started() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for j := range f.Live.Active() {
			if !yield(j) {
				return
			}
		}
		for j := range f.Gone.All() {
			if !yield(j) {
				return
			}
		}
	}
}
