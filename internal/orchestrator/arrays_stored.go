package orchestrator

import (
	"context"
	"strconv"

	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/arrays"
)

// Done job arrays, read from the store (package arrays takes them out of
// memory): what the API reads and asks of an array that memory no longer
// holds; the API's reads of them are package arrays' (arrays.Ops).

// arrayStore is the store where done arrays are read; nil for a bare
// orchestrator of a unit test.
func (o *Orchestrator) arrayStore() arrays.Store {
	if o.cfg.Store == nil {
		return nil
	}
	return o.cfg.Store
}

// storedArrayIDs returns up to limit ids of arrays in the store (done or
// not) that start with prefix; none without a store, or when the read
// fails (logged). Lock held or not.
func (o *Orchestrator) storedArrayIDs(prefix string, limit int) []string {
	if o.cfg.Store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	ids, err := o.cfg.Store.ArrayIDsWithPrefix(ctx, prefix, limit)
	if err != nil {
		o.log.Warn("look up array ids in the store", "prefix", prefix, "err", err)
	}
	return ids
}

// isArray reports whether id is the id of an array, in memory or done.
// Lock held.
func (o *Orchestrator) isArray(id string) bool {
	if o.arr.Has(id) {
		return true
	}
	ids := o.storedArrayIDs(id, 1)
	return len(ids) == 1 && ids[0] == id
}

// replayDone answers a submission replayed under the idempotency key of
// an array that is done: its first task, from the store. Write lock held.
func (o *Orchestrator) replayDone(id string) (submitResult, bool) {
	rec, err := arrays.Stored(o.arrayStore(), id)
	if err != nil || len(rec.Array.Tasks) == 0 {
		return submitResult{}, false
	}
	j, ok := o.found().LookupAny(id + "_" + strconv.Itoa(rec.Array.Tasks[0]))
	if !ok {
		return submitResult{}, false
	}
	return submitResult{o.view(j, true), true}, true
}
