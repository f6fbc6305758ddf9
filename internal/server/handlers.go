package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// submit is POST /queue/submit. The job's user is the token's: a body
// "user" that names someone else is refused (403) unless the token is an
// admin's, which may submit on behalf of anyone. Idempotency keys are
// scoped to the caller, so two users' keys never collide.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) error {
	var req api.SubmitRequest
	p := principal(r)
	if err := decode(r, &req); err != nil {
		var e *api.Error
		if errors.As(err, &e) && e.Status == http.StatusRequestEntityTooLarge {
			// An oversized submission costs a token of the caller's
			// rate, as a submission does: a flood of them is refused
			// 429 like one of jobs.
			if rerr := s.checkRate(w, p); rerr != nil {
				return rerr
			}
		}
		return err
	}
	req.User = strings.TrimSpace(req.User)
	switch {
	case req.User == "":
		req.User = p.User
	case req.User != p.User && !p.IsAdmin():
		return &api.Error{Status: http.StatusForbidden, Code: "user_mismatch", Field: "user",
			Message: fmt.Sprintf("the token is %s's: jobs are submitted as %s (only admins may submit for another user, not %q)", p.User, p.User, truncate(req.User, 40))}
	}
	req.Project = strings.TrimSpace(req.Project)
	if req.Project == "" {
		req.Project = p.DefaultProject()
	}
	if req.Project != "" && !p.MaySubmitTo(req.Project) {
		return &api.Error{Status: http.StatusForbidden, Code: "project_forbidden", Field: "project",
			Message: fmt.Sprintf("%s may submit to %s only, not %q", p.User, strings.Join(p.Projects, ", "), truncate(req.Project, 40))}
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 256 {
		return api.BadRequest("invalid_header", "Idempotency-Key", "the Idempotency-Key header is longer than 256 characters")
	}
	if !utf8.ValidString(key) {
		return api.BadRequest("invalid_header", "Idempotency-Key", "the Idempotency-Key header is not valid UTF-8")
	}
	if err := s.checkRate(w, p); err != nil {
		return err
	}
	if key != "" {
		key = p.User + "/" + key
	}
	// The audit entry goes in the job's transaction: one durable write.
	a := s.submitAudit(r)
	job, replayed, err := s.o.SubmitWith(r.Context(), req, orchestrator.SubmitOptions{IdempotencyKey: key, Exempt: p.IsAdmin(), Audit: a})
	if a.Recorded() {
		audited(r)
	}
	if err != nil {
		return err
	}
	setTarget(r, job.ID)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		s.metrics.submissions.Inc()
	}
	if job.ArrayJobID != "" {
		return s.submittedArray(w, r, job) // arrays.go
	}
	w.Header().Set("Location", "/jobs/"+job.ID)
	return writeJSON(w, http.StatusCreated, job)
}

func (s *Server) queue(w http.ResponseWriter, r *http.Request) error {
	limit, cursor, err := pageParams(r.URL.Query(), orchestrator.DefaultQueuePage) // jobpages.go
	if err != nil {
		return err
	}
	user, err := ownerFilter(r) // mine.go: user=, mine=true
	if err != nil {
		return err
	}
	q, err := s.o.QueuePageOf(user, limit, cursor)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, q)
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
	id, array, err := s.feat.Refs.Ref(r.PathValue("job_id"), principal(r).User)
	if err != nil {
		return err
	}
	setTarget(r, id)
	if array {
		return s.cancelArrayID(w, r, id, grace) // the id names a job array (arrays.go)
	}
	if err := s.mayActOnJob(r, id); err != nil {
		return err
	}
	job, stopping, err := s.o.Cancel(r.Context(), id, grace)
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
	id, err := s.jobID(r)
	switch {
	case errors.Is(err, api.ErrNotFound):
		// A bad priority is named before a missing job, as it was before
		// ids could be prefixes: SetPriority checks the value, then answers
		// 404 for the id as given.
		id = r.PathValue("job_id")
	case err != nil:
		return err
	}
	if err := s.mayActOnJob(r, id); err != nil {
		return err
	}
	job, err := s.o.SetPriority(r.Context(), id, req.Priority)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, job)
}

// jobID is the full id of the job the path's {job_id} names: the id
// itself, or a unique prefix of at least orchestrator.MinIDPrefix
// characters, its number (1234, a task 1234_7 or PREFIX_7), or a name
// that names exactly one of the caller's jobs (404 when none matches,
// 409 ambiguous_id when several do; orchestrator.ResolveRef). The audit
// entry's target becomes the full id.
func (s *Server) jobID(r *http.Request) (string, error) {
	id, err := s.feat.Refs.JobRef(r.PathValue("job_id"), principal(r).User)
	if err != nil {
		return "", err
	}
	setTarget(r, id)
	return id, nil
}

// mayActOnJob answers 403 unless the caller may change job id; an
// unknown job is left to the orchestrator's 404.
func (s *Server) mayActOnJob(r *http.Request, id string) error {
	owner, project, ok := s.o.JobOwner(id)
	if !ok {
		return nil
	}
	return mayActOn(principal(r), "job", id, owner, project)
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := orchestrator.JobFilter{State: api.State(q.Get("state")), User: q.Get("user"), Project: q.Get("project"), Name: q.Get("name")}
	if f.State != "" && !f.State.Valid() {
		return api.Invalid("state", "%q is not a job state; use one of %v", f.State, api.States)
	}
	if err := mineJobs(r, &f); err != nil { // mine.go: mine=true
		return err
	}
	var err error
	if f.Since, f.Limit, err = sinceLimit(q); err != nil {
		return err
	}
	if f.Until, f.Cursor, err = untilCursor(q); err != nil { // jobpages.go
		return err
	}
	jobs, next, err := s.o.JobPage(r.Context(), f)
	if err != nil {
		return err
	}
	who := principal(r)
	for i := range jobs {
		hideEnv(who, &jobs[i])
	}
	arrays := s.arraySummaries(func(yield func(string) bool) { // arrays.go
		for _, j := range jobs {
			if !yield(j.ArrayJobID) {
				return
			}
		}
	})
	return writeJobList(w, api.JobList{Jobs: jobs, Arrays: arrays, NextCursor: next}) // jobpages.go
}

// hiddenValue replaces the value of each of a job's environment variables
// for a reader who may not act on the job.
const hiddenValue = "(hidden)"

// hideEnv hides the values of a job's environment from a caller who may
// not act on it (a viewer, another user): env is where jobs get their
// credentials (WANDB_API_KEY, HF_TOKEN). The names stay, so readers still
// see what the job was given. j's map is replaced, never changed in place.
func hideEnv(who auth.Principal, j *api.Job) {
	hideScript(who, j) // jobio.go
	if len(j.Env) == 0 || who.CanActOn(j.User, j.Project) {
		return
	}
	env := make(map[string]string, len(j.Env))
	for k := range j.Env {
		env[k] = hiddenValue
	}
	j.Env = env
}

// parseSince reads an RFC 3339 time or a duration back from now ("2h").
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		if !api.TimeInBounds(t) { // api/bounds.go
			return t, &api.Error{Message: fmt.Sprintf("must be from %d-01-01 to before %d-01-01 UTC", api.MinYear, api.MaxYear)}
		}
		return t, nil
	}
	if d, err := api.ParseSeconds(v); err == nil && !strings.ContainsAny(v, "-+") {
		return now.Add(-d.Duration()), nil
	}
	return time.Time{}, &api.Error{Message: "must be an RFC 3339 time (2026-11-22T09:00:00Z) or a duration such as 2h"}
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) error {
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	job, err := s.o.Job(id)
	if err != nil {
		return err
	}
	hideEnv(principal(r), &job)
	return writeJSON(w, http.StatusOK, job)
}

// whatIf is GET /jobs/{job_id}/what-if?gpus=N: when the queued job would
// start with N GPUs per node (orchestrator.WhatIf); nothing changes.
func (s *Server) whatIf(w http.ResponseWriter, r *http.Request) error {
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	v := r.URL.Query().Get("gpus")
	n, err := strconv.Atoi(v)
	if v == "" || err != nil {
		return api.Invalid("gpus", "gpus=%q is not a number of GPUs: give gpus=N, N from 1 to the GPUs of the largest node", v)
	}
	ans, err := s.o.WhatIf(r.Context(), id, n)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ans)
}

func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.o.Cluster(r.Context()))
}

func (s *Server) allocate(w http.ResponseWriter, r *http.Request) error {
	var req api.AllocateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	setTarget(r, req.JobID)
	h, err := s.feat.Holds.Hold(r.Context(), req, principal(r).User)
	if err != nil {
		return err
	}
	if h.Queued { // "wait": true and not free now: queued as a job (docs/interactive.md)
		return writeJSON(w, http.StatusAccepted, h)
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
	setTarget(r, req.JobID)
	if owner, ok := s.o.HoldOwner(req.JobID); ok {
		if err := mayActOn(principal(r), "hold", req.JobID, owner, ""); err != nil {
			return err
		}
	}
	h, err := s.feat.Holds.Release(r.Context(), req.JobID)
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

// maxPolicyEntries bounds the weights and quotas one policy update names.
const maxPolicyEntries = 10000

func (s *Server) setPolicies(w http.ResponseWriter, r *http.Request) error {
	var u api.PoliciesUpdate
	if err := decode(r, &u); err != nil {
		return err
	}
	n := 0
	if u.Weights != nil {
		n += len(u.Weights.Users) + len(u.Weights.Projects)
	}
	if u.Quotas != nil {
		n += len(u.Quotas.Users) + len(u.Quotas.Projects)
	}
	if n > maxPolicyEntries {
		return api.Invalid("weights", "an update names %d weights and quotas; at most %d are allowed at once", n, maxPolicyEntries)
	}
	p, err := s.o.SetPolicies(r.Context(), u)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

// sinceLimit reads the since and limit parameters of the history listings
// (/jobs, /audit): zero when absent.
func sinceLimit(q url.Values) (since time.Time, limit int, err error) {
	if v := q.Get("since"); v != "" {
		if since, err = parseSince(v, time.Now()); err != nil {
			return since, 0, api.Invalid("since", "%s", err.Error())
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return since, 0, api.Invalid("limit", "must be an integer between 1 and 100000")
		}
		limit = n
	}
	return since, limit, nil
}
