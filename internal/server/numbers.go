package server

import (
	"net/http"

	"github.com/corral-sched/corral/internal/api"
)

// completeJobs is GET /complete/jobs: the caller's unfinished jobs and
// arrays (an array once), newest first, with their numbers and names:
// what the CLI's shell completion offers for a job id (one call, from
// memory).
func (s *Server) completeJobs(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, api.JobRefList{Jobs: s.feat.Refs.Active(principal(r).User)})
}
