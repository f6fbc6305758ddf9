package server

import (
	"net/http"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Job arrays' routes (docs/arrays.md): GET, PATCH and DELETE
// /arrays/{array_id}. An array's id may be given as a unique prefix of at
// least 6 characters, as a job's may.

// arrayID is the full id of the array the path's {array_id} names, made
// the call's audit target.
func (s *Server) arrayID(r *http.Request) (string, error) {
	id, err := s.feat.Refs.ArrayRef(r.PathValue("array_id"), principal(r).User) // a number or a name too
	if err != nil {
		return "", err
	}
	setTarget(r, id)
	return id, nil
}

// mayActOnArray answers 403 unless the caller may change the array: its
// owner, its project's admin, or an admin, as for its tasks.
func (s *Server) mayActOnArray(r *http.Request, id string) error {
	owner, project, ok := s.feat.Arrays.Owner(id)
	if !ok {
		return nil
	}
	return mayActOn(principal(r), "array", id, owner, project)
}

// array is GET /arrays/{array_id}: the array's spec, counts by state and
// task indexes.
func (s *Server) array(w http.ResponseWriter, r *http.Request) error {
	id, err := s.arrayID(r)
	if err != nil {
		return err
	}
	a, err := s.feat.Arrays.Get(id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

// setArray is PATCH /arrays/{array_id}: {"throttle": N} changes how many
// tasks may be active at once (0: no limit).
func (s *Server) setArray(w http.ResponseWriter, r *http.Request) error {
	var req api.ArrayRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Throttle == nil {
		return api.Invalid("throttle", "is required: the most tasks active at once, or 0 for no limit")
	}
	if *req.Throttle < 0 {
		return api.Invalid("throttle", "must be 0 (no limit) or more, not %d", *req.Throttle)
	}
	id, err := s.arrayID(r)
	if err != nil {
		return err
	}
	if err := s.mayActOnArray(r, id); err != nil {
		return err
	}
	a, err := s.feat.Arrays.SetThrottle(r.Context(), id, *req.Throttle)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

// cancelArray is DELETE /arrays/{array_id}: every unfinished task is
// canceled; 202 when some were running and are being stopped.
func (s *Server) cancelArray(w http.ResponseWriter, r *http.Request) error {
	grace, err := cancelGrace(r)
	if err != nil {
		return err
	}
	id, err := s.arrayID(r)
	if err != nil {
		return err
	}
	return s.cancelArrayID(w, r, id, grace)
}

func (s *Server) cancelArrayID(w http.ResponseWriter, r *http.Request, id string, grace time.Duration) error {
	if err := s.mayActOnArray(r, id); err != nil {
		return err
	}
	a, stopping, err := s.feat.Arrays.Cancel(r.Context(), id, grace)
	if err != nil {
		return err
	}
	if stopping {
		return writeJSON(w, http.StatusAccepted, a)
	}
	return writeJSON(w, http.StatusOK, a)
}

// cancelGrace reads the grace query parameter of a cancel.
func cancelGrace(r *http.Request) (time.Duration, error) {
	g := r.URL.Query().Get("grace")
	if g == "" {
		return 0, nil
	}
	d, err := api.ParseSeconds(g)
	if err != nil {
		return 0, api.Invalid("grace", "%s", err.Error())
	}
	return d.Duration(), nil
}

// submittedArray answers a submission that made an array (or replayed
// one): its first task, with the array's summary; Location is the array.
func (s *Server) submittedArray(w http.ResponseWriter, r *http.Request, job api.Job) error {
	setTarget(r, job.ArrayJobID)
	ans := api.SubmitAnswer{Job: job}
	if a, err := s.feat.Arrays.Get(job.ArrayJobID); err == nil {
		a.Tasks = nil
		ans.ArraySummary = &a
	}
	w.Header().Set("Location", "/arrays/"+job.ArrayJobID)
	return writeJSON(w, http.StatusCreated, ans)
}

// arraySummaries returns the summaries of the arrays whose tasks are in
// jobs, in order of first appearance.
func (s *Server) arraySummaries(ids func(yield func(string) bool)) []api.Array {
	seen := map[string]bool{}
	var list []string
	for id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			list = append(list, id)
		}
	}
	if len(list) == 0 {
		return nil
	}
	return s.feat.Arrays.Summaries(list)
}
