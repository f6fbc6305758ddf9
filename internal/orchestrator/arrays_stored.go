package orchestrator

import (
	"context"
	"errors"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// Done job arrays, read from the store (package arrays takes them out of
// memory): what the API reads and asks of an array that memory no longer
// holds. Its counts come from its tasks' rows (store.Array), so GET
// /arrays/{id} answers as it did before the array left memory.

// storedArray reads a job array's record, with its counts, from the
// store: a 404 when the store holds none. Lock held or not.
func (o *Orchestrator) storedArray(id string) (store.ArrayRecord, error) {
	if o.cfg.Store == nil { // a bare orchestrator of a unit test
		return store.ArrayRecord{}, api.NotFound("no job array %q", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	rec, err := o.cfg.Store.Array(ctx, id)
	switch {
	case errors.Is(err, store.ErrNoArray):
		return store.ArrayRecord{}, api.NotFound("no job array %q", id)
	case err != nil:
		return store.ArrayRecord{}, err
	}
	return rec, nil
}

// storedArrayIDs returns up to limit ids of arrays in the store (done or
// not) that start with prefix. Lock held or not.
func (o *Orchestrator) storedArrayIDs(prefix string, limit int) []string {
	return o.storedIDs("array ids", prefix, limit, Store.ArrayIDsWithPrefix) // finished.go
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

// throttleDone sets the throttle of a done array, as SetThrottle does an
// array in memory: the change is stored with its record (and changes
// nothing else: no task of it will start again). Write lock held.
func (o *Orchestrator) throttleDone(tx *txn, id string, n int) error {
	rec, err := o.storedArray(id)
	if err != nil {
		return err
	}
	if rec.Array.Throttle != n {
		rec.Array.Throttle = n
		tx.batch.Arrays = append(tx.batch.Arrays, rec)
		o.log.Info("job array throttle changed", "array_id", id, "throttle", n)
	}
	return nil
}

// cancelDone is CancelArray's answer for an array memory does not hold:
// 409 wrong_state when the store has it (every task has ended), else 404.
// Write lock held.
func (o *Orchestrator) cancelDone(id string) error {
	if _, err := o.storedArray(id); err != nil {
		return err
	}
	return api.Conflict("wrong_state", "every task of array %s has already ended", id)
}

// replayDone answers a submission replayed under the idempotency key of
// an array that is done: its first task, from the store. Write lock held.
func (o *Orchestrator) replayDone(id string) (submitResult, bool) {
	rec, err := o.storedArray(id)
	if err != nil || len(rec.Array.Tasks) == 0 {
		return submitResult{}, false
	}
	j, ok := o.lookupAny(id + "_" + strconv.Itoa(rec.Array.Tasks[0]))
	if !ok {
		return submitResult{}, false
	}
	return submitResult{o.view(j, true), true}, true
}
