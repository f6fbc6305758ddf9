package refs

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// prefixMemory is what memory holds of the ids that start with a prefix.
type prefixMemory struct {
	arrays map[string]bool   // arrays in memory (not done) whose ids start with it
	jobs   map[string]string // jobs in memory whose ids start with it: id -> their array's id ("" for none)
}

// memoryPrefix copies what v holds of the ids that start with prefix
// (arrays only when arrays is true).
func memoryPrefix(v View, prefix string, arrays bool) prefixMemory {
	m := prefixMemory{arrays: map[string]bool{}, jobs: map[string]string{}}
	if len(prefix) < MinIDPrefix {
		return m
	}
	if arrays {
		v.ArraysWithPrefix(prefix, m.arrays)
	}
	for j := range v.WithPrefix(prefix) {
		m.jobs[j.ID] = j.ArrayJobID
	}
	return m
}

// arrayByPrefix resolves id to an array from what memory held (m, its
// arrays only when id could name one by prefix) and the store's array ids
// that start with it: the array's id and whether memory held it; ok is
// false when id names none. A prefix that several arrays, or an array and
// other jobs, share is a 409 ambiguous_id.
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

// Array resolves id to an array (exactly, or by a unique prefix) in the
// three steps: aid, whether memory held it, and ok false when id names
// none.
func (r *Resolver) Array(id string) (aid string, live, ok bool, err error) {
	v := r.jobs.View()
	if v.Array(id) {
		v.Done()
		return id, true, true, nil
	}
	if len(id) < MinIDPrefix || strings.Contains(id, "_") {
		v.Done()
		return "", false, false, nil
	}
	m := memoryPrefix(v, id, true)
	v.Done()
	stored := r.storedArrayIDs(id, len(m.arrays)+2)
	return arrayByPrefix(id, m, stored)
}

// arrayOnlyPrefix resolves prefix (of a task's id, PREFIX_INDEX) to the
// array whose id it is or starts with: as Array, but other jobs whose ids
// start with it do not make it ambiguous (the index says an array is
// meant).
func (r *Resolver) arrayOnlyPrefix(prefix string) (string, bool, error) {
	v := r.jobs.View()
	if v.Array(prefix) {
		v.Done()
		return prefix, true, nil
	}
	if len(prefix) < MinIDPrefix || strings.Contains(prefix, "_") {
		v.Done()
		return "", false, nil
	}
	m := memoryPrefix(v, prefix, true)
	v.Done()
	m.jobs = nil
	aid, _, ok, err := arrayByPrefix(prefix, m, r.storedArrayIDs(prefix, len(m.arrays)+2))
	return aid, ok, err
}

// ArrayID returns the id of the array that id names (exactly, or by a
// unique prefix of at least MinIDPrefix characters): 404 when none does,
// 409 ambiguous_id when several do.
func (r *Resolver) ArrayID(id string) (string, error) {
	aid, _, ok, err := r.Array(id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", api.NotFound("no job array %q", id)
	}
	return aid, nil
}

// JobID returns the id of the job that id names: the job whose id it is
// exactly (even when it is also a prefix of another job's id), or else
// the one job whose id starts with id, when id has at least MinIDPrefix
// characters. No match (or a shorter prefix) is a 404; several matches
// are a 409 with code ambiguous_id that says how many. An id that names
// an array is a 404 is_array.
//
// An exact id of a job in memory costs one lookup in the view.
func (r *Resolver) JobID(id string) (string, error) {
	v := r.jobs.View()
	if v.Job(id) { // live, or recently ended
		v.Done()
		return id, nil
	}
	liveArray := v.Array(id)
	prefixed := len(id) >= MinIDPrefix && !strings.Contains(id, "_")
	m := memoryPrefix(v, id, prefixed)
	v.Done()
	if liveArray {
		return "", isArray(id)
	}
	if prefixed {
		if aid, _, ok, err := arrayByPrefix(id, m, r.storedArrayIDs(id, len(m.arrays)+2)); ok && err == nil {
			return "", isArray(aid)
		}
	}
	if r.stored(id) { // a job that ended
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
	// Ended jobs are in the store only.
	for _, cand := range r.storedJobIDs(id, n+2) {
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

// isArray is JobID's answer for an id that names an array: job routes
// take task ids.
func isArray(aid string) error {
	return &api.Error{Status: http.StatusNotFound, Code: "is_array",
		Message: fmt.Sprintf("%s is a job array, not a job: see corral array show %s, or name a task as %s_INDEX", aid, aid, aid)}
}
