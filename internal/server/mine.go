package server

import (
	"net/http"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// ownerFilter reads the owner filter of GET /jobs and GET /queue: user=NAME,
// or mine=true for the caller's own jobs (the token's user, resolved here,
// so a client needs no second call to learn who it is). Both together must
// agree. It returns the user to filter by ("" for everyone's).
func ownerFilter(r *http.Request) (string, error) {
	q := r.URL.Query()
	user := q.Get("user")
	switch q.Get("mine") {
	case "", "false", "0":
		return user, nil
	case "true", "1":
	default:
		return "", api.Invalid("mine", "must be true or false")
	}
	me := principal(r).User
	if user != "" && user != me {
		return "", api.Invalid("mine", "mine=true selects %s's jobs; it cannot be combined with user=%s", me, truncate(user, 40))
	}
	return me, nil
}

// mineJobs applies ownerFilter to GET /jobs's filter.
func mineJobs(r *http.Request, f *orchestrator.JobFilter) error {
	user, err := ownerFilter(r)
	f.User = user
	return err
}
