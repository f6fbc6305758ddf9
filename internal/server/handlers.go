package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

func (s *Server) submit(w http.ResponseWriter, r *http.Request) error {
	var req api.SubmitRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	job, replayed, err := s.o.Submit(r.Context(), req, r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		s.metrics.submissions.Inc()
	}
	w.Header().Set("Location", "/jobs/"+job.ID)
	return writeJSON(w, http.StatusCreated, job)
}

func (s *Server) queue(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.o.Queue())
}

func (s *Server) queueStatistics(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.o.Statistics())
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	var grace time.Duration
	if g := r.URL.Query().Get("grace"); g != "" {
		d, err := api.ParseSeconds(g)
		if err != nil {
			return api.Invalid("grace", "%s", err.Error())
		}
		grace = d.Duration()
	}
	job, stopping, err := s.o.Cancel(r.Context(), r.PathValue("job_id"), grace)
	if err != nil {
		return err
	}
	if stopping {
		return writeJSON(w, http.StatusAccepted, job)
	}
	return writeJSON(w, http.StatusOK, job)
}

func (s *Server) setPriority(w http.ResponseWriter, r *http.Request) error {
	var req api.PriorityRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	job, err := s.o.SetPriority(r.Context(), r.PathValue("job_id"), req.Priority)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, job)
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := orchestrator.JobFilter{State: api.State(q.Get("state")), User: q.Get("user"), Project: q.Get("project")}
	if f.State != "" && !f.State.Valid() {
		return api.Invalid("state", "%q is not a job state; use one of %v", f.State, api.States)
	}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v, time.Now())
		if err != nil {
			return api.Invalid("since", "%s", err.Error())
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return api.Invalid("limit", "must be an integer between 1 and 100000")
		}
		f.Limit = n
	}
	return writeJSON(w, http.StatusOK, api.JobList{Jobs: s.o.Jobs(f)})
}

// parseSince reads an RFC 3339 time or a duration back from now ("2h").
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := api.ParseSeconds(v); err == nil && !strings.ContainsAny(v, "-+") {
		return now.Add(-d.Duration()), nil
	}
	return time.Time{}, &api.Error{Message: "must be an RFC 3339 time (2026-11-22T09:00:00Z) or a duration such as 2h"}
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) error {
	job, err := s.o.Job(r.PathValue("job_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, job)
}

func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.o.Cluster(r.Context()))
}

func (s *Server) allocate(w http.ResponseWriter, r *http.Request) error {
	var req api.AllocateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	h, err := s.o.Hold(r.Context(), req, "")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, h)
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) error {
	var req api.ReleaseRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.JobID) == "" {
		return api.Invalid("job_id", "is required")
	}
	h, err := s.o.Release(r.Context(), req.JobID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, h)
}

func (s *Server) orchestratorStatus(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.o.Status())
}

func (s *Server) orchestratorSwitch(on bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		st, err := s.o.SetScheduling(r.Context(), on)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, st)
	}
}

func (s *Server) policies(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.o.Policies())
}

func (s *Server) setPolicies(w http.ResponseWriter, r *http.Request) error {
	var u api.PoliciesUpdate
	if err := decode(r, &u); err != nil {
		return err
	}
	p, err := s.o.SetPolicies(r.Context(), u)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}
