package refs

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// Store is what references read of the store (the orchestrator's store
// is one): numbers, ended jobs, ids by prefix, names. Each read is
// bounded by feature.StoreReadTimeout and made with no View open.
type Store interface {
	NumberID(ctx context.Context, n int64) (id string, found bool, err error)
	Job(ctx context.Context, id string) (api.Job, error)
	JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	ArrayIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	NamedJobs(ctx context.Context, user, name string, limit int) ([]store.Named, error)
}

// StoredNumber reads from the store the id of the job or array numbered
// n; found is false when none is, or there is no store. It calls no
// BeforeRead hook: the loop may call it with its lock held (a
// dependency's number at submit).
func (r *Resolver) StoredNumber(n int64) (id string, found bool, err error) {
	if r.store == nil {
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	return r.store.NumberID(ctx, n)
}

// storedNumber is StoredNumber for a resolution, made without the lock.
func (r *Resolver) storedNumber(n int64) (string, bool, error) {
	r.before("job number")
	return r.StoredNumber(n)
}

// stored reports whether the store holds the job id (one that ended).
func (r *Resolver) stored(id string) bool {
	r.before("job")
	if r.store == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	_, err := r.store.Job(ctx, id)
	return err == nil
}

// storedJobIDs returns up to limit ids of jobs in the store that start
// with prefix; none when the read fails (logged).
func (r *Resolver) storedJobIDs(prefix string, limit int) []string {
	r.before("job ids")
	return r.storedIDs("job ids", prefix, limit, Store.JobIDsWithPrefix)
}

// storedArrayIDs returns up to limit ids of arrays in the store (done or
// not) that start with prefix; none when the read fails (logged).
func (r *Resolver) storedArrayIDs(prefix string, limit int) []string {
	r.before("array ids")
	return r.storedIDs("array ids", prefix, limit, Store.ArrayIDsWithPrefix)
}

func (r *Resolver) storedIDs(what, prefix string, limit int, read func(Store, context.Context, string, int) ([]string, error)) []string {
	if r.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	ids, err := read(r.store, ctx, prefix, limit)
	if err != nil {
		r.log.Warn("look up "+what+" in the store", "prefix", prefix, "err", err)
	}
	return ids
}

// storedNamed reads from the store up to limit of user's jobs and arrays
// (an array once) named name.
func (r *Resolver) storedNamed(user, name string, limit int) ([]store.Named, error) {
	if r.store == nil {
		return nil, nil
	}
	r.before("job names")
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	return r.store.NamedJobs(ctx, user, name, limit)
}

// before runs the BeforeRead hook, if any.
func (r *Resolver) before(what string) {
	if r.beforeRead != nil {
		r.beforeRead(what)
	}
}
