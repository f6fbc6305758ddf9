package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// Short numbers (issue 27). Each job and each job array gets a number,
// unique in the cluster and increasing ("1234"; the tasks of array 1234
// are "1234_7"), which people type instead of its id. The loop, the one
// writer, keeps the last number given in memory (Orchestrator.lastNumber,
// read from the store at start-up, after a leader has fenced the store);
// a submission takes the next one and writes it with the job, in the
// batch that commits it (store/numbers.go): a number is durable exactly
// when its job is, and the store refuses one given twice.
//
// ResolveRef turns what a person typed into an id: a number, a task
// NUMBER_INDEX or PREFIX_INDEX, an id or a unique prefix of one, or a
// name that names exactly one of the caller's jobs or arrays.

// takeNumber gives the job or array id the next number, written with tx.
// Loop only (write lock held).
func (tx *txn) takeNumber(id string) int64 {
	tx.o.lastNumber++
	tx.batch.Numbers = append(tx.batch.Numbers, store.NumberRow{Number: tx.o.lastNumber, ID: id})
	return tx.o.lastNumber
}

// loadNumbers sets the last number given from the store's, at start-up.
func (o *Orchestrator) loadNumbers(st *store.State) {
	o.lastNumber = st.MaxNumber
	for i := range st.Jobs { // numbers are written with their jobs: none is larger, but never go back
		o.lastNumber = max(o.lastNumber, st.Jobs[i].Number)
	}
	for i := range st.Arrays {
		o.lastNumber = max(o.lastNumber, st.Arrays[i].Array.Number)
	}
}

// parseNumberRef reads "1234" or "1234_7": the number, and the task's
// index as typed ("" for none). ok is false for anything else.
func parseNumberRef(ref string) (n int64, task string, ok bool) {
	num, task, hasTask := strings.Cut(ref, "_")
	if !allDigits(num) || (hasTask && !allDigits(task)) {
		return 0, "", false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, task, true
}

func allDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// numberID returns the id of the job or array numbered n: 404 when none
// is. It reads the store, without the lock.
func (o *Orchestrator) numberID(n int64) (string, error) {
	o.beforeRead("job number")
	return o.storedNumberID(n)
}

// storedNumberID is numberID without the test hook, for the loop (which
// reads the store under its lock, as dependencies do).
func (o *Orchestrator) storedNumberID(n int64) (string, error) {
	if o.cfg.Store == nil { // a bare orchestrator of a unit test
		return "", api.NotFound("no job number %d", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	id, found, err := o.cfg.Store.NumberID(ctx, n)
	if err != nil {
		return "", err
	}
	if !found {
		return "", api.NotFound("no job number %d", n)
	}
	return id, nil
}

// ResolveRef resolves what a person typed for a job to the job's id, or
// to an array's id (array true):
//
//   - a number, 1234: the job or array numbered so;
//   - a task, 1234_7 or PREFIX_7: task 7 of array 1234, or of the array
//     whose id is PREFIX or starts with it;
//   - an id, or a unique prefix of at least MinIDPrefix characters
//     (ResolveArrayID, ResolveJobID);
//   - else a name, when user's jobs and arrays of that name are exactly
//     one (several: 409 ambiguous_id, listing their numbers).
//
// 404 when it names nothing. A prefix that arrays' and jobs' ids share is
// answered as by ResolveArrayID (409 on array_id). No lock is held across
// the store's reads.
func (o *Orchestrator) ResolveRef(ref, user string) (id string, array bool, err error) {
	return o.resolveRef(ref, user, true)
}

// resolveRef is ResolveRef; arrayErrs says which error an ambiguous
// prefix gets: the array's (true) or the job's.
func (o *Orchestrator) resolveRef(ref, user string, arrayErrs bool) (id string, array bool, err error) {
	if n, task, ok := parseNumberRef(ref); ok {
		id, err := o.numberID(n)
		if err != nil {
			return "", false, err
		}
		if task != "" {
			id, err = o.ResolveJobID(id + "_" + task)
			if errors.Is(err, api.ErrNotFound) {
				return "", false, api.NotFound("no job %s (job %d has no task %s)", ref, n, task)
			}
			return id, false, err
		}
		return o.resolveIDOrArray(id, arrayErrs)
	}
	if prefix, task, ok := cutTask(ref); ok {
		if aid, found, err := o.arrayOnlyPrefix(prefix); err != nil || found {
			if err != nil {
				return "", false, err
			}
			id, err := o.ResolveJobID(aid + "_" + task)
			return id, false, err
		}
	}
	id, array, err = o.resolveIDOrArray(ref, arrayErrs)
	if err == nil || user == "" || !notFound(err) {
		return id, array, err
	}
	named, nerr := o.named(ref, user)
	switch {
	case nerr != nil:
		o.log.Warn("resolve a job's name", "name", ref, "err", nerr)
		return "", false, err
	case len(named) == 0:
		return "", false, err
	case len(named) == 1:
		return named[0].ID, named[0].Array, nil
	}
	return "", false, ambiguousName(ref, named)
}

// ResolveJobRef is ResolveRef for a route that takes a job: an array is
// a 404 is_array.
func (o *Orchestrator) ResolveJobRef(ref, user string) (string, error) {
	id, array, err := o.resolveRef(ref, user, false)
	if err == nil && array {
		return "", isArray(id)
	}
	return id, err
}

// ResolveArrayRef is ResolveRef for a route that takes an array: a job
// is a 404.
func (o *Orchestrator) ResolveArrayRef(ref, user string) (string, error) {
	id, array, err := o.ResolveRef(ref, user)
	if err == nil && !array {
		return "", api.NotFound("no job array %q", ref)
	}
	return id, err
}

// resolveIDOrArray resolves an id or a prefix, to an array first (an
// array's id is a prefix of its tasks'), then to a job; when neither
// resolves, the error is the array's when arrayErrs is set (as
// ResolveArrayID answers), else the job's (as ResolveJobID answers).
func (o *Orchestrator) resolveIDOrArray(ref string, arrayErrs bool) (string, bool, error) {
	aid, _, found, aerr := o.resolveArrayID(ref)
	if aerr == nil && found {
		return aid, true, nil
	}
	id, err := o.ResolveJobID(ref)
	if err != nil && aerr != nil && arrayErrs {
		return "", false, aerr
	}
	return id, false, err
}

// arrayOnlyPrefix resolves prefix (of a task's id, PREFIX_INDEX) to the
// array whose id it is or starts with: as resolveArrayID, but other jobs
// whose ids start with it do not make it ambiguous (the index says an
// array is meant).
func (o *Orchestrator) arrayOnlyPrefix(prefix string) (string, bool, error) {
	o.mu.RLock()
	if o.arr.Has(prefix) {
		o.mu.RUnlock()
		return prefix, true, nil
	}
	if len(prefix) < MinIDPrefix || strings.Contains(prefix, "_") {
		o.mu.RUnlock()
		return "", false, nil
	}
	m := o.memoryPrefix(prefix, true)
	o.mu.RUnlock()
	m.jobs = nil
	o.beforeRead("array ids")
	aid, _, ok, err := arrayByPrefix(prefix, m, o.storedArrayIDs(prefix, len(m.arrays)+2))
	return aid, ok, err
}

// cutTask splits PREFIX_INDEX (the index all digits) into its parts.
func cutTask(ref string) (prefix, task string, ok bool) {
	i := strings.LastIndexByte(ref, '_')
	if i <= 0 || !allDigits(ref[i+1:]) {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

// notFound reports whether err is a plain 404 (not is_array).
func notFound(err error) bool {
	var ae *api.Error
	return errors.Is(err, api.ErrNotFound) && !(errors.As(err, &ae) && ae.Code == "is_array")
}

// maxNamed is how many jobs of one name a resolution lists.
const maxNamed = 10

// named returns user's jobs and arrays named name (an array once), from
// memory and the store, newest first, at most maxNamed+1. Memory is
// copied under the read lock; the store is read without it.
func (o *Orchestrator) named(name, user string) ([]store.Named, error) {
	found := map[string]store.Named{}
	o.mu.RLock()
	for _, j := range o.jobs {
		if j.Name != name || j.User != user {
			continue
		}
		if j.ArrayJobID != "" {
			found[j.ArrayJobID] = store.Named{ID: j.ArrayJobID, Number: j.Number, Array: true}
		} else {
			found[j.ID] = store.Named{ID: j.ID, Number: j.Number}
		}
	}
	o.mu.RUnlock()
	if o.cfg.Store != nil {
		o.beforeRead("job names")
		ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
		defer cancel()
		stored, err := o.cfg.Store.NamedJobs(ctx, user, name, maxNamed+1)
		if err != nil {
			return nil, err
		}
		for _, n := range stored {
			if _, ok := found[n.ID]; !ok {
				found[n.ID] = n
			}
		}
	}
	out := make([]store.Named, 0, len(found))
	for _, n := range found {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b store.Named) int { return strings.Compare(b.ID, a.ID) })
	return out[:min(len(out), maxNamed+1)], nil
}

// ambiguousName is the 409 for a name several of the caller's jobs have:
// it lists them by number (an array as NUMBER_*), newest first.
func ambiguousName(name string, named []store.Named) error {
	refs := make([]string, 0, len(named))
	for i, n := range named {
		if i == maxNamed {
			refs = append(refs, "…")
			break
		}
		ref := n.ID
		if n.Number > 0 {
			ref = strconv.FormatInt(n.Number, 10)
		}
		if n.Array {
			ref += " (an array)"
		}
		refs = append(refs, ref)
	}
	more := ""
	if len(named) > maxNamed {
		more = " or more"
	}
	return &api.Error{Status: http.StatusConflict, Code: "ambiguous_id", Field: "job_id",
		Message: fmt.Sprintf("%q names %d%s of your jobs: %s; give a number", name, min(len(named), maxNamed), more, strings.Join(refs, ", "))}
}

// maxRefs bounds ActiveRefs' answer.
const maxRefs = 500

// ActiveRefs lists user's unfinished jobs and arrays (an array once),
// newest first, at most maxRefs: what shell completion offers. Memory
// only (every unfinished job is there), under the read lock.
func (o *Orchestrator) ActiveRefs(user string) []api.JobRef {
	o.mu.RLock()
	byID := map[string]api.JobRef{}
	for _, j := range o.jobs {
		if j.User != user || j.State.Terminal() {
			continue
		}
		if j.ArrayJobID == "" {
			byID[j.ID] = api.JobRef{Number: j.Number, ID: j.ID, Name: j.Name, State: j.State}
			continue
		}
		r, seen := byID[j.ArrayJobID]
		if !seen {
			r = api.JobRef{Number: j.Number, ID: j.ArrayJobID, Name: j.Name, State: api.StateQueued, Array: true}
		}
		if j.State.Active() {
			r.State = api.StateRunning
		}
		byID[j.ArrayJobID] = r
	}
	o.mu.RUnlock()
	out := make([]api.JobRef, 0, len(byID))
	for _, r := range byID {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b api.JobRef) int { return strings.Compare(b.ID, a.ID) })
	return out[:min(len(out), maxRefs)]
}
