package server

import (
	"net/http"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// ownerFilter reads the owner filter of GET /jobs and GET /queue: user=NAME,
// or mine=true for the caller's own jobs (the token's user, resolved here,
// so a client needs no second call to learn who it is), or mine=auto for
// what corral queue and corral jobs show by default: the caller's own jobs
// when the caller's role is user, everyone's for admins and viewers (who
// own none). mine=true with another user= is refused; mine=auto with any.
// It returns the user to filter by ("" for everyone's).
func ownerFilter(r *http.Request) (string, error) {
	q := r.URL.Query()
	user := q.Get("user")
	p := principal(r)
	switch q.Get("mine") {
	case "", "false", "0":
		return user, nil
	case "true", "1":
		if user != "" && user != p.User {
			return "", api.Invalid("mine", "mine=true selects %s's jobs; it cannot be combined with user=%s", p.User, truncate(user, 40))
		}
		return p.User, nil
	case "auto":
		if user != "" {
			return "", api.Invalid("mine", "mine=auto picks whose jobs by the caller's role; give it or user=, not both")
		}
		if p.Role == api.RoleUser {
			return p.User, nil
		}
		return "", nil
	}
	return "", api.Invalid("mine", "must be true, false or auto")
}

// mineJobs applies ownerFilter to GET /jobs's filter.
func mineJobs(r *http.Request, f *orchestrator.JobFilter) error {
	user, err := ownerFilter(r)
	f.User = user
	return err
}
