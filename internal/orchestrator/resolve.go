package orchestrator

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// MinIDPrefix is the fewest characters of a job id that may name the job
// by prefix, as in git and docker.
const MinIDPrefix = 6

// ResolveJobID returns the id of the job that id names: the job whose id
// it is exactly (even when it is also a prefix of another job's id), or
// else the one job whose id starts with id, when id has at least
// MinIDPrefix characters. No match (or a shorter prefix) is a 404; several
// matches are a 409 with code ambiguous_id that says how many.
//
// An exact id costs one map lookup; only a miss scans the jobs.
func (o *Orchestrator) ResolveJobID(id string) (string, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if _, ok := o.jobs[id]; ok {
		return id, nil
	}
	if err := o.arrayNotJob(id); err != nil {
		return "", err
	}
	if _, ok := o.lookupAny(id); ok { // finished.go: a job that ended
		return id, nil
	}
	if len(id) < MinIDPrefix {
		return "", api.NotFound("no job %q (a prefix needs at least %d characters)", id, MinIDPrefix)
	}
	var found string
	n := 0
	for _, cand := range o.order {
		if _, live := o.jobs[cand]; live && strings.HasPrefix(cand, id) {
			found = cand
			n++
		}
	}
	// Ended jobs are in the store only (finished.go).
	for _, cand := range o.storedIDs("job ids", id, n+2, (*store.Store).JobIDsWithPrefix) {
		if _, live := o.jobs[cand]; !live {
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
