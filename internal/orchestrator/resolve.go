package orchestrator

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// MinIDPrefix is the fewest characters of a job id that may name the job
// by prefix, as in git and docker.
const MinIDPrefix = 6

// Resolving ids and prefixes in three steps (reads.go): what memory holds
// is copied under the read lock (prefixMemory), the store is read without
// it, and the answer is computed from both copies.

// prefixMemory is what memory holds of the ids that start with a prefix.
type prefixMemory struct {
	arrays map[string]bool   // arrays in memory (not done) whose ids start with it
	jobs   map[string]string // jobs in memory whose ids start with it: id -> their array's id ("" for none)
}

// memoryPrefix copies what memory holds of the ids that start with
// prefix (arrays only when arrays is true). Read lock held.
func (o *Orchestrator) memoryPrefix(prefix string, arrays bool) prefixMemory {
	m := prefixMemory{arrays: map[string]bool{}, jobs: map[string]string{}}
	if len(prefix) < MinIDPrefix {
		return m
	}
	if arrays {
		for aid := range o.arr.IDs() {
			if strings.HasPrefix(aid, prefix) {
				m.arrays[aid] = true
			}
		}
	}
	// o.order is in id order (but for orderUnsorted): the jobs that start
	// with prefix are one run of it.
	if !o.orderUnsorted {
		i, _ := slices.BinarySearch(o.order, prefix)
		for ; i < len(o.order) && strings.HasPrefix(o.order[i], prefix); i++ {
			if j, live := o.jobs[o.order[i]]; live {
				m.jobs[j.ID] = j.ArrayJobID
			}
		}
		return m
	}
	for _, cand := range o.order {
		if j, live := o.jobs[cand]; live && strings.HasPrefix(cand, prefix) {
			m.jobs[j.ID] = j.ArrayJobID
		}
	}
	return m
}

// arrayByPrefix resolves id to an array from what memory held (m, its
// arrays only when id could name one by prefix) and the store's array ids
// that start with it: the array's id and whether memory held it; ok is
// false when id names none. A prefix that several arrays, or an array and
// other jobs, share is a 409 ambiguous_id. No lock held.
func arrayByPrefix(id string, m prefixMemory, stored []string) (aid string, live, ok bool, err error) {
	found := map[string]bool{} // true: in memory
	for a := range m.arrays {
		found[a] = true
	}
	for _, a := range stored {
		if !m.arrays[a] {
			found[a] = false
		}
	}
	if live, exact := found[id]; exact {
		return id, live, true, nil
	}
	n := len(found)
	if n == 0 {
		return "", false, false, nil
	}
	for k, v := range found { // the one, when n is 1
		aid, live = k, v
	}
	// A prefix shared with jobs outside the array is ambiguous too: ids
	// begin with their submission time.
	others := 0
	for _, arrayID := range m.jobs {
		if n > 1 || arrayID != aid {
			others++
		}
	}
	if n == 1 && others == 0 {
		return aid, live, true, nil
	}
	return "", false, true, &api.Error{Status: http.StatusConflict, Code: "ambiguous_id", Field: "array_id",
		Message: fmt.Sprintf("%q is the prefix of %d arrays' ids and %d other jobs' ids; give more characters", id, n, others)}
}

// resolveArrayID resolves id to an array (exactly, or by a unique prefix)
// in the three steps: aid, whether memory held it, and ok false when id
// names none. No lock held.
func (o *Orchestrator) resolveArrayID(id string) (aid string, live, ok bool, err error) {
	o.mu.RLock()
	if o.arr.Has(id) {
		o.mu.RUnlock()
		return id, true, true, nil
	}
	if len(id) < MinIDPrefix || strings.Contains(id, "_") {
		o.mu.RUnlock()
		return "", false, false, nil
	}
	m := o.memoryPrefix(id, true)
	o.mu.RUnlock()
	o.beforeRead("array ids")
	stored := o.storedArrayIDs(id, len(m.arrays)+2) // arrays_stored.go
	return arrayByPrefix(id, m, stored)
}

// ResolveArrayID returns the id of the array that id names (exactly, or by
// a unique prefix of at least MinIDPrefix characters): 404 when none does,
// 409 ambiguous_id when several do. The store is read without the lock.
func (o *Orchestrator) ResolveArrayID(id string) (string, error) {
	aid, _, ok, err := o.resolveArrayID(id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", api.NotFound("no job array %q", id)
	}
	return aid, nil
}

// ResolveJobID returns the id of the job that id names: the job whose id
// it is exactly (even when it is also a prefix of another job's id), or
// else the one job whose id starts with id, when id has at least
// MinIDPrefix characters. No match (or a shorter prefix) is a 404; several
// matches are a 409 with code ambiguous_id that says how many. An id that
// names an array is a 404 is_array.
//
// An exact id of a job in memory costs one map lookup; the store is read
// without the lock (reads.go).
func (o *Orchestrator) ResolveJobID(id string) (string, error) {
	o.mu.RLock()
	if _, ok := o.lookup(id); ok { // live, or recently ended
		o.mu.RUnlock()
		return id, nil
	}
	liveArray := o.arr.Has(id)
	prefixed := len(id) >= MinIDPrefix && !strings.Contains(id, "_")
	m := o.memoryPrefix(id, prefixed)
	o.mu.RUnlock()
	if liveArray {
		return "", isArray(id)
	}
	if prefixed {
		o.beforeRead("array ids")
		if aid, _, ok, err := arrayByPrefix(id, m, o.storedArrayIDs(id, len(m.arrays)+2)); ok && err == nil {
			return "", isArray(aid)
		}
	}
	o.beforeRead("job")
	if _, err := o.stored(id); err == nil { // finished.go: a job that ended
		return id, nil
	}
	if len(id) < MinIDPrefix {
		return "", api.NotFound("no job %q (a prefix needs at least %d characters)", id, MinIDPrefix)
	}
	var found string
	n := 0
	for cand := range m.jobs {
		found = cand
		n++
	}
	// Ended jobs are in the store only (finished.go).
	o.beforeRead("job ids")
	for _, cand := range o.storedIDs("job ids", id, n+2, Store.JobIDsWithPrefix) {
		if _, live := m.jobs[cand]; !live {
			found = cand
			n++
		}
	}
	switch n {
	case 0:
		return "", api.NotFound("no job %q", id)
	case 1:
		return found, nil
	}
	return "", &api.Error{Status: http.StatusConflict, Code: "ambiguous_id", Field: "job_id",
		Message: fmt.Sprintf("%q is the prefix of %d jobs' ids; give more characters", id, n)}
}

// isArray is ResolveJobID's answer for an id that names an array: job
// routes take task ids.
func isArray(aid string) error {
	return &api.Error{Status: http.StatusNotFound, Code: "is_array",
		Message: fmt.Sprintf("%s is a job array, not a job: see corral array show %s, or name a task as %s_INDEX", aid, aid, aid)}
}
