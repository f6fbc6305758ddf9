package arrays

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// IDStore lists the ids of the arrays in the store (done or not) that
// start with a prefix.
type IDStore interface {
	ArrayIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
}

// IsArray reports whether id is the id of an array: one in memory, or one
// in st that is done (st nil: no store). A failed read of st is logged on
// log and answers no. Lock held.
func (b *Books) IsArray(st IDStore, id string, log *slog.Logger) bool {
	if b.Has(id) {
		return true
	}
	if st == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	ids, err := st.ArrayIDsWithPrefix(ctx, id, 1)
	if err != nil {
		log.Warn("look up array ids in the store", "prefix", id, "err", err)
	}
	return len(ids) == 1 && ids[0] == id
}

// FirstTask returns array id's first task, which answers a submission
// replayed under the idempotency key that made the array, as the first
// answer did: from memory, or, once the array is done, by its stored
// record (st) and lookup (the ended jobs' ended.Finder.LookupAny). False
// when neither holds it. Write lock held.
func (b *Books) FirstTask(st Store, id string, lookup func(id string) (*api.Job, bool)) (*api.Job, bool) {
	if tasks, ok := b.Tasks(id); ok {
		return tasks[0], true
	}
	rec, err := Stored(st, id)
	if err != nil || len(rec.Array.Tasks) == 0 {
		return nil, false
	}
	return lookup(id + "_" + strconv.Itoa(rec.Array.Tasks[0]))
}
