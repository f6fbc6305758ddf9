package server

import (
	"net/http"

	"github.com/corral-sched/corral/internal/api"
)

// setDependency is PATCH /queue/{job_id}/dependency: body {"depends_on":
// EXPR} replaces a queued job's dependencies ("" removes them). Refused
// with 422 naming depends_on as at submission, and for cycles; 409 when
// the job is no longer queued.
func (s *Server) setDependency(w http.ResponseWriter, r *http.Request) error {
	var req api.DependencyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.DependsOn == nil {
		return api.Invalid("depends_on", "is required (\"\" removes the job's dependencies)")
	}
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	if err := s.mayActOnJob(r, id); err != nil {
		return err
	}
	job, err := s.feat.Deps.Set(r.Context(), id, *req.DependsOn)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, job)
}
