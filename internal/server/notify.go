package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// Notifications is what the notification routes need.
type Notifications struct {
	Endpoints *notify.Registry
	Sender    *notify.Sender // for POST /notify/endpoints/{id}/test
	Log       NotificationLog
}

// NotificationLog reads the outbox (store.Store).
type NotificationLog interface {
	Outbox(ctx context.Context, f store.OutboxFilter) ([]store.OutboxItem, error)
}

// WithNotify serves /notify/endpoints and /notifications.
func WithNotify(n Notifications) Option {
	return func(s *Server) { s.notify = &n }
}

// notifyOff is the answer of the notification routes on a server built
// without them.
func notifyOff() error {
	return &api.Error{Status: http.StatusServiceUnavailable, Code: "notifications_off", Message: "this server sends no notifications"}
}

// manages reports whether p may manage (see, remove, test, read the log
// of) an endpoint: admins every one; a user their own, and those of the
// projects they administer.
func manages(p auth.Principal, e api.Endpoint) bool {
	switch {
	case p.IsAdmin():
		return true
	case e.Scope == api.ScopeUser:
		return e.Owner == p.User
	case e.Scope == api.ScopeProject:
		return slices.Contains(p.ProjectAdmin, e.Owner)
	}
	return false
}

// createEndpoint is POST /notify/endpoints. The answer shows the URL,
// secret and address once; nothing logs or audits them (the audit entry
// names the new endpoint's id).
func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request) error {
	if s.notify == nil {
		return notifyOff()
	}
	var req api.EndpointRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p := principal(r)
	req.Scope = strings.TrimSpace(req.Scope)
	if req.Scope == "" {
		req.Scope = api.ScopeUser
	}
	switch req.Scope {
	case api.ScopeUser:
		if req.Project != "" {
			return api.Invalid("project", "is for scope project")
		}
		req.User = strings.TrimSpace(req.User)
		switch {
		case req.User == "":
			req.User = p.User
		case req.User != p.User && !p.IsAdmin():
			return &api.Error{Status: http.StatusForbidden, Code: "user_mismatch", Field: "user",
				Message: "only admins may add endpoints for another user"}
		case !auth.ValidName(req.User):
			return api.Invalid("user", "%q is not a valid user name", truncate(req.User, 40))
		}
	case api.ScopeProject:
		req.Project = strings.TrimSpace(req.Project)
		if req.Project == "" || !auth.ValidName(req.Project) {
			return api.Invalid("project", "a project endpoint names a valid project")
		}
		if !p.IsAdmin() && !slices.Contains(p.ProjectAdmin, req.Project) {
			return &api.Error{Status: http.StatusForbidden, Code: "not_project_admin", Field: "project",
				Message: p.User + " is not an admin of project " + req.Project}
		}
	case api.ScopeCluster:
		if !p.IsAdmin() {
			return api.Forbidden("forbidden", "only admins manage the cluster's endpoints (admin alerts)")
		}
	default:
		return api.Invalid("scope", "want user, project or cluster, not %q", truncate(req.Scope, 40))
	}
	e, err := s.notify.Endpoints.Add(r.Context(), req, p.User)
	if err != nil {
		return err
	}
	setTarget(r, e.ID)
	w.Header().Set("Location", "/notify/endpoints/"+e.ID)
	return writeJSON(w, http.StatusCreated, e)
}

// listEndpoints is GET /notify/endpoints: the endpoints the caller
// manages, redacted.
func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) error {
	if s.notify == nil {
		return writeJSON(w, http.StatusOK, api.EndpointList{Endpoints: []api.Endpoint{}})
	}
	p := principal(r)
	return writeJSON(w, http.StatusOK, api.EndpointList{Endpoints: s.notify.Endpoints.List(func(e api.Endpoint) bool { return manages(p, e) })})
}

// managedEndpoint returns the endpoint named in the path when the caller
// manages it: 404 when there is none, 403 when it is someone else's.
func (s *Server) managedEndpoint(r *http.Request) (api.Endpoint, error) {
	if s.notify == nil {
		return api.Endpoint{}, notifyOff()
	}
	id := r.PathValue("endpoint_id")
	e, ok := s.notify.Endpoints.Get(id)
	if !ok {
		return api.Endpoint{}, api.NotFound("no notification endpoint %q", truncate(id, 40))
	}
	setTarget(r, e.ID)
	if p := principal(r); !manages(p, e) {
		return api.Endpoint{}, api.Forbidden("not_owner", "endpoint "+e.ID+" is not "+p.User+"'s to manage")
	}
	return e, nil
}

// removeEndpoint is DELETE /notify/endpoints/{endpoint_id}.
func (s *Server) removeEndpoint(w http.ResponseWriter, r *http.Request) error {
	e, err := s.managedEndpoint(r)
	if err != nil {
		return err
	}
	if err := s.notify.Endpoints.Remove(r.Context(), e.ID); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, e)
}

// testEndpoint is POST /notify/endpoints/{endpoint_id}/test: a test
// message, sent now; 502 delivery_failed when the endpoint refuses it.
func (s *Server) testEndpoint(w http.ResponseWriter, r *http.Request) error {
	e, err := s.managedEndpoint(r)
	if err != nil {
		return err
	}
	if s.notify.Sender == nil {
		return notifyOff()
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := s.notify.Sender.Test(ctx, e.ID, principal(r).User); err != nil {
		// The answer's text is the same whatever stands at the port
		// (notify.HTTP); the log keeps the cause.
		s.log.Info("notify: a test delivery failed", "endpoint", e.ID, "err", err, "cause", notify.Cause(err))
		return &api.Error{Status: http.StatusBadGateway, Code: "delivery_failed", Message: "the test notification was not delivered: " + err.Error()}
	}
	return writeJSON(w, http.StatusOK, api.EndpointTest{Delivered: true})
}

// notifications is GET /notifications: the delivery log of the endpoints
// the caller manages, newest first (state, endpoint, limit, before).
func (s *Server) notifications(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := store.OutboxFilter{State: q.Get("state"), Limit: 100}
	switch f.State {
	case "", store.OutboxPending, store.OutboxDelivered, store.OutboxFailed:
	default:
		return api.Invalid("state", "want pending, delivered or failed, not %q", truncate(f.State, 40))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return api.Invalid("limit", "want 1 to 1000")
		}
		f.Limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return api.Invalid("before", "want a notification id")
		}
		f.Before = n
	}
	out := api.NotificationList{Notifications: []api.Notification{}}
	if s.notify == nil {
		return writeJSON(w, http.StatusOK, out)
	}
	p := principal(r)
	f.Endpoints = []string{}
	for _, e := range s.notify.Endpoints.List(func(e api.Endpoint) bool { return manages(p, e) }) {
		f.Endpoints = append(f.Endpoints, e.ID)
	}
	if id := q.Get("endpoint"); id != "" {
		if !slices.Contains(f.Endpoints, id) {
			return api.NotFound("no notification endpoint %q of yours", truncate(id, 40))
		}
		f.Endpoints = []string{id}
	}
	if p.IsAdmin() && q.Get("endpoint") == "" {
		f.Endpoints = nil // every row, those of removed endpoints too
	}
	rows, err := s.notify.Log.Outbox(r.Context(), f)
	if err != nil {
		return err
	}
	for _, it := range rows {
		out.Notifications = append(out.Notifications, notification(it))
	}
	return writeJSON(w, http.StatusOK, out)
}

// notification is an outbox row as GET /notifications shows it.
func notification(it store.OutboxItem) api.Notification {
	n := api.Notification{ID: it.Seq, EventID: notify.EventID(it.Seq), EndpointID: it.EndpointID, Kind: it.Kind, State: it.State,
		Attempts: it.Attempts, CreatedAt: it.CreatedAt, LastError: it.LastError}
	var ev notify.Event
	if json.Unmarshal([]byte(it.Data), &ev) == nil {
		n.Summary = ev.Summary()
		if ev.Job != nil {
			n.JobID = ev.Job.ID
		}
	}
	if it.Digest != 0 {
		n.Digest = notify.DigestID(it.Digest)
	}
	if it.State == store.OutboxPending && !it.NextAt.IsZero() {
		t := it.NextAt
		n.NextAt = &t
	}
	if !it.DeliveredAt.IsZero() {
		t := it.DeliveredAt
		n.DeliveredAt = &t
	}
	return n
}
