package arrays

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// Store is where done arrays are read: package arrays takes them out of
// memory once their last task ended, and the API still answers for them
// from their stored record, whose counts come from its tasks' rows.
type Store interface {
	Array(ctx context.Context, id string) (store.ArrayRecord, error)
}

// Stored reads a done array's record, with its counts, from st: a 404
// naming the id when st holds none (or there is no store: st nil).
func Stored(st Store, id string) (store.ArrayRecord, error) {
	if st == nil {
		return store.ArrayRecord{}, api.NotFound("no job array %q", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), feature.StoreReadTimeout)
	defer cancel()
	rec, err := st.Array(ctx, id)
	switch {
	case errors.Is(err, store.ErrNoArray):
		return store.ArrayRecord{}, api.NotFound("no job array %q", id)
	case err != nil:
		return store.ArrayRecord{}, err
	}
	return rec, nil
}

// Resolver finds the array an id names, exactly or by a unique prefix
// (feature/refs' Resolver.Array): live when memory holds it.
type Resolver interface {
	Array(id string) (aid string, live, ok bool, err error)
}

// Ops are the API's reads and operations on arrays: reads of memory
// under the loop's read lock, of done arrays from the store without it;
// each change one op of the loop's transaction, answered once durable.
type Ops struct {
	Books *Books
	Loop  feature.Loop
	Refs  Resolver
	Store Store         // nil: none (a unit test's bare loop)
	Grace time.Duration // the cancel grace, when a cancel gives none
	Log   *slog.Logger
}

// Get returns the array that id names (exactly or by prefix), with its
// counts by state and its task indexes: from memory, or from the store
// when it is done.
func (o Ops) Get(id string) (api.Array, error) {
	aid, live, ok, err := o.Refs.Array(id)
	if err != nil {
		return api.Array{}, err
	}
	if !ok {
		return api.Array{}, api.NotFound("no job array %q", id)
	}
	if live {
		var s api.Array
		o.Loop.Read(func() { s, ok = o.Books.Summary(aid, true) })
		if ok {
			return s, nil
		}
		// done meanwhile: the store has it
	}
	o.Loop.BeforeRead("array")
	rec, err := Stored(o.Store, aid)
	if err != nil {
		return api.Array{}, err
	}
	return Summarize(rec.Array), nil
}

// Summaries returns the summaries (counts, no task list) of the arrays
// named, in the order given, skipping unknown ids: from memory, or from
// the store for done arrays.
func (o Ops) Summaries(ids []string) []api.Array {
	out := make([]api.Array, len(ids))
	have := make([]bool, len(ids))
	o.Loop.Read(func() {
		for i, id := range ids {
			out[i], have[i] = o.Books.Summary(id, false)
		}
	})
	for i, id := range ids {
		if have[i] {
			continue
		}
		o.Loop.BeforeRead("array")
		if rec, err := Stored(o.Store, id); err == nil {
			s := Summarize(rec.Array)
			s.Tasks = nil
			out[i], have[i] = s, true
		}
	}
	kept := out[:0]
	for i := range out {
		if have[i] {
			kept = append(kept, out[i])
		}
	}
	return kept
}

// Owner returns the user and project of an array.
func (o Ops) Owner(id string) (user, project string, ok bool) {
	o.Loop.Read(func() {
		if rec, _ := o.Books.Live(id); rec != nil {
			user, project, ok = rec.User, rec.Project, true
		}
	})
	if ok {
		return user, project, true
	}
	o.Loop.BeforeRead("array")
	rec, err := Stored(o.Store, id)
	if err != nil {
		return "", "", false
	}
	return rec.Array.User, rec.Array.Project, true
}

// SetThrottle changes how many of an array's tasks may be active at once
// (0: no limit); the change is stored with the array's record and takes
// effect at the next cycle. Tasks already running are never stopped. A
// done array's record changes too, and nothing else: no task of it will
// start again.
func (o Ops) SetThrottle(ctx context.Context, id string, n int) (api.Array, error) {
	if n < 0 {
		return api.Array{}, api.Invalid("throttle", "must be 0 (no limit) or more, not %d", n)
	}
	_, err := o.Loop.Do(ctx, func(tx feature.Tx) (any, error) {
		found, changed := o.Books.SetThrottle(tx, id, n)
		if !found {
			return nil, o.throttleDone(tx, id, n)
		}
		if changed {
			o.Loop.Replan()
			o.Log.Info("job array throttle changed", "array_id", id, "throttle", n)
		}
		return nil, nil
	})
	if err != nil {
		return api.Array{}, err
	}
	return o.Get(id)
}

// throttleDone sets the throttle of a done array, in tx.
func (o Ops) throttleDone(tx feature.Tx, id string, n int) error {
	rec, err := Stored(o.Store, id)
	if err != nil {
		return err
	}
	if rec.Array.Throttle != n {
		rec.Array.Throttle = n
		b := tx.Batch()
		b.Arrays = append(b.Arrays, rec)
		o.Log.Info("job array throttle changed", "array_id", id, "throttle", n)
	}
	return nil
}

// Cancel cancels every unfinished task of an array, as a job's cancel
// does each: queued tasks at once, running ones with SIGTERM, then
// SIGKILL after grace (0: Grace). stopping reports whether some were
// running and are being stopped. All of it is one transaction. A done
// array is a 409 wrong_state, an unknown one a 404.
func (o Ops) Cancel(ctx context.Context, id string, grace time.Duration) (arr api.Array, stopping bool, err error) {
	if grace <= 0 {
		grace = o.Grace
	}
	stopping, err = feature.Do(ctx, o.Loop, func(tx feature.Tx) (bool, error) {
		steps, stopping, found, err := o.Books.Cancel(id) // what each task gets
		if !found {
			if _, err := Stored(o.Store, id); err != nil {
				return false, err
			}
			return false, api.Conflict("wrong_state", "every task of array %s has already ended", id)
		}
		if err != nil {
			return false, err
		}
		run := o.Loop.Running(ctx)
		for _, st := range steps {
			j := st.Task
			if !st.Stop {
				now := tx.Now()
				j.FinishedAt = &now
				o.Loop.Transition(tx, j, api.StateCanceled, api.ReasonCanceled, "canceled while queued (its array was canceled)")
				continue
			}
			j.CancelRequested = true
			o.Loop.Touch(tx, j)
			run.Stop(tx, j, grace, "", "stop job")
		}
		o.Log.Info("job array canceled", "array_id", id, "stopping", stopping)
		return stopping, nil
	})
	if err != nil {
		return api.Array{}, false, err
	}
	arr, err = o.Get(id)
	return arr, stopping, err
}
