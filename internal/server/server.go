// Package server is Corral's HTTP API: the routes of SPEC.md over the
// orchestrator. Handlers decode and check the request, call the
// orchestrator, and write JSON; they hold no state of their own.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/attach"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/tunnel"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Server serves the API. Create it with New.
type Server struct {
	o             *orchestrator.Orchestrator
	feat          orchestrator.FeatureOps // the features' own operations (budgets, bookings, arrays, refs, ...), over o's loop
	agents        Agents
	join          string // the join token agents present; empty: agent routes refuse
	sessions      agentSessions
	auth          *auth.Service // nil: every authenticated route answers 401
	publicMetrics bool
	limiter       *rateLimiter
	log           *slog.Logger
	mux           *http.ServeMux
	metrics       *metrics
	routes        []route
	notify        *Notifications   // nil: the notification routes answer 503 (notify.go)
	attach        *attach.Registry // connections attached to jobs (shells, notebook proxy)
	advise        AdviseSource     // GET /advise (advise.go); nil: off
	tunnels       *tunnel.Hub      // nil: no shells or port streams (shell.go)
	nb            *notebooks       // the notebook proxy (proxy.go)
	leaderAddr    string           // WithLeaderAddress: /healthz says role leader, at this address
	login         LoginConfig      // WithLogin (login.go)
	devices       *auth.Devices    // pending device sign-ins (login.go)
	conns         *Conns           // WithConns: the listener's connections; nil: none tracked
	audits        *auditSpool      // the audit entries the store could not write yet (auditspool.go)
}

// route is one API route; the table drives the mux, /openapi.json and the
// per-route metrics.
type route struct {
	method, path, summary string
	handler               func(http.ResponseWriter, *http.Request) error
	access                access // who may call it
	action                string // its name in the audit trail; "": not audited
}

// Agents is the executor side of the agent protocol (agents.Pool).
type Agents interface {
	Register(ctx context.Context, reg api.AgentRegistration, addr string) (api.AgentConfig, error)
	Sync(ctx context.Context, rep api.AgentReport) (api.AgentWork, error)
}

// Option configures a Server.
type Option func(*Server)

// WithAgents serves the agent protocol (/agent/v1/...) for agents that
// present joinToken.
func WithAgents(a Agents, joinToken string) Option {
	return func(s *Server) { s.agents, s.join = a, joinToken }
}

// WithAuth checks callers' tokens with a and records the audit trail in
// it. Without it, every route but /healthz answers 401.
func WithAuth(a *auth.Service) Option {
	return func(s *Server) { s.auth = a }
}

// WithPublicMetrics serves /metrics without a token (for a Prometheus
// scraper on a trusted network).
func WithPublicMetrics() Option {
	return func(s *Server) { s.publicMetrics = true }
}

// WithSubmitRate limits each user's submissions to rate per second with
// bursts of burst (a token bucket; admins are exempt). rate <= 0: no limit.
func WithSubmitRate(rate float64, burst int) Option {
	return func(s *Server) { s.limiter = newRateLimiter(rate, burst, time.Now) }
}

// WithAttach records the connections attached to jobs (shells, the
// notebook proxy) in r, which the orchestrator reads for idle reclaim.
// Without it the server keeps a registry of its own.
func WithAttach(r *attach.Registry) Option {
	return func(s *Server) { s.attach = r }
}

// New returns the API server over o.
func New(o *orchestrator.Orchestrator, logger *slog.Logger, opts ...Option) *Server {
	s := &Server{o: o, log: logger, mux: http.NewServeMux(), sessions: agentSessions{byNode: map[string]string{}}}
	if o != nil { // nil: a route table's tests, which call no handler
		s.feat = o.FeatureOps()
	}
	for _, opt := range opts {
		opt(s)
	}
	if s.tunnels != nil && s.notebookProxy().remote == nil {
		s.nb.remote = s // notebooks on remote agents, through the tunnel (shell.go)
	}
	if s.attach == nil {
		s.attach = attach.New(nil)
	}
	if s.auth != nil {
		s.audits = &auditSpool{write: s.auth.Record, log: logger}
	}
	s.metrics = newMetrics(o, s.feat.History)
	// Who may call each route (access) and what the audit trail calls it
	// (action; empty: a read, not audited). The role matrix test in
	// authz_test.go checks every row.
	s.routes = []route{
		{"GET", "/healthz", "Liveness", s.healthz, public, ""},
		{"POST", "/queue/submit", "Submit a job", s.submit, user, "job.submit"},
		{"GET", "/queue", "The queue, in the order jobs will be considered", s.queue, viewer, ""},
		{"GET", "/queue/statistics", "Queue statistics", s.queueStatistics, viewer, ""},
		{"DELETE", "/queue/{job_id}", "Cancel a job (its owner, its project's admin, or an admin)", s.cancel, user, "job.cancel"},
		{"PATCH", "/queue/{job_id}/priority", "Change a job's priority (its owner, its project's admin, or an admin)", s.setPriority, user, "job.priority"},
		{"PATCH", "/queue/{job_id}/dependency", "Change a queued job's depends_on (its owner, its project's admin, or an admin)", s.setDependency, user, "job.dependency"},
		{"GET", "/jobs", "Jobs, newest first, with filters", s.jobs, viewer, ""},
		{"GET", "/jobs/{job_id}", "One job with its events", s.job, viewer, ""},
		{"GET", "/jobs/{job_id}/logs", "A job's output (follow=true streams)", s.logs, viewer, ""},
		{"GET", "/jobs/{job_id}/what-if", "When a queued job would start with gpus=N GPUs per node; nothing is submitted or changed", s.whatIf, viewer, ""},
		{"GET", "/complete/jobs", "The caller's unfinished jobs and arrays with their numbers, for shell completion", s.completeJobs, viewer, ""},
		{"GET", "/cluster/gpu-status", "Every node and GPU", s.clusterStatus, viewer, ""},
		{"GET", "/cluster/nodes", "Every node and GPU (as /cluster/gpu-status)", s.clusterStatus, viewer, ""},
		{"GET", "/advise", "The load profile of a period, for corral advise (since=30d)", s.adviseProfile, viewer, ""},
		{"GET", "/cluster/nodes/{node_id}/history", "A node's telemetry samples (since=1h)", s.nodeHistory, viewer, ""},
		{"POST", "/cluster/nodes/{node_id}/{action}", "Cordon, drain or uncordon a node (admin)", s.nodeAction, admin, "node.{action}"},
		{"POST", "/cluster/gpu-allocate", "Hold GPUs for work outside Corral", s.allocate, user, "hold.create"},
		{"POST", "/cluster/gpu-release", "Release held GPUs (the holder or an admin)", s.release, user, "hold.release"},
		{"GET", "/orchestrator/status", "The scheduling loop's status", s.orchestratorStatus, viewer, ""},
		{"POST", "/orchestrator/start", "Start scheduling (admin)", s.orchestratorSwitch(true), admin, "orchestrator.start"},
		{"POST", "/orchestrator/stop", "Stop scheduling; running jobs are untouched (admin)", s.orchestratorSwitch(false), admin, "orchestrator.stop"},
		{"GET", "/orchestrator/policies", "The active policy", s.policies, viewer, ""},
		{"PUT", "/orchestrator/policies", "Change the policy, weights and quotas (admin)", s.setPolicies, admin, "policy.set"},
		{"GET", "/metrics", "Prometheus metrics", s.prometheus, viewer, ""},
		{"POST", "/agent/v1/register", "Agent protocol: a node registers (join token)", s.agentRegister, agent, "agent.register"},
		{"POST", "/agent/v1/sync", "Agent protocol: report and get work, long poll (join token and node session)", s.agentSync, agent, ""},
		{"POST", "/agent/v1/logs", "Agent protocol: ship a task's output (join token and node session)", s.agentLogs, agent, ""},
		{"POST", "/auth/tokens", "Create a token; its secret is shown once (admin)", s.createToken, admin, "token.create"},
		{"GET", "/auth/tokens", "List tokens, never their secrets (admin)", s.listTokens, admin, ""},
		{"DELETE", "/auth/tokens/{id}", "Revoke a token at once (admin)", s.revokeToken, admin, "token.revoke"},
		{"GET", "/auth/whoami", "Who the caller is: user, role, projects", s.whoami, viewer, ""},
		{"POST", "/auth/session", "Sign the dashboard in: a token in, an HttpOnly cookie out (without Authorization, it needs the X-Corral-Request header)", s.createSession, public, "session.create"},
		{"DELETE", "/auth/session", "Sign the dashboard out", s.deleteSession, viewer, "session.delete"},
		{"GET", "/audit", "The audit trail, newest first (user, action, since, limit; admin)", s.audit, admin, ""},
		{"GET", "/openapi.json", "This API as OpenAPI 3", s.openapi, viewer, ""},
		{"GET", "/history", "The cluster over time, for graphs (since=24h, points=N, node=ID|all)", s.history, viewer, ""},
		{"GET", "/events", "Live dashboard updates as server-sent events", s.events, viewer, ""},
		{"GET", "/notify/endpoints", "Notification endpoints the caller manages, redacted", s.listEndpoints, user, ""},
		{"POST", "/notify/endpoints", "Add a notification endpoint (slack, webhook, email); its URL and secret are shown once", s.createEndpoint, user, "notify.endpoint.create"},
		{"DELETE", "/notify/endpoints/{endpoint_id}", "Remove a notification endpoint (its owner, its project's admin, or an admin)", s.removeEndpoint, user, "notify.endpoint.remove"},
		{"POST", "/notify/endpoints/{endpoint_id}/test", "Send a test notification now", s.testEndpoint, user, "notify.endpoint.test"},
		{"GET", "/notifications", "The delivery log of the caller's endpoints, newest first (state, endpoint, limit, before)", s.notifications, user, ""},
		{"GET", "/notify/defaults", "The caller's own notification defaults (admins: ?user=X's)", s.notifyDefaults, user, ""},
		{"PUT", "/notify/defaults", "Set the caller's own notification defaults, or default for the built-in ones (admins: ?user=X's)", s.setNotifyDefaults, user, "notify.defaults"},
		{"GET", "/arrays/{array_id}", "A job array: its spec and its tasks' counts by state", s.array, viewer, ""},
		{"PATCH", "/arrays/{array_id}", "Change a job array's throttle (its owner, its project's admin, or an admin)", s.setArray, user, "array.throttle"},
		{"DELETE", "/arrays/{array_id}", "Cancel every unfinished task of a job array (its owner, its project's admin, or an admin)", s.cancelArray, user, "array.cancel"},
		{"GET", "/jobs/{job_id}/shell", "A shell in a running job, as a WebSocket of shell frames (rank, tty, rows, cols, term, cmd; its owner, its project's admin, or an admin)", s.shell, user, "job.shell"},
		{"GET", "/agent/v1/tunnel", "Agent protocol: the tunnel's control channel, or a stream's (session=ID) (join token and node session)", s.agentTunnel, agent, ""},
		{"GET", "/reservations", "Every booking, by start (docs/bookings.md)", s.listReservations, viewer, ""},
		{"POST", "/reservations", "Book GPUs: users for themselves within --booking-allowance, admins for anyone", s.createReservation, user, "reservation.create"},
		{"GET", "/reservations/{name}", "One booking", s.reservation, viewer, ""},
		{"PATCH", "/reservations/{name}", "Change a booking (its booker or an admin)", s.updateReservation, user, "reservation.update"},
		{"DELETE", "/reservations/{name}", "Delete a booking, or release it once begun (its booker or an admin)", s.deleteReservation, user, "reservation.delete"},
	}
	s.routes = append(s.routes, s.usageRoutes()...) // usage.go
	s.routes = append(s.routes, s.loginRoutes()...) // login.go: signing in
	if s.publicMetrics {
		for i := range s.routes {
			if s.routes[i].path == "/metrics" {
				s.routes[i].access = public
			}
		}
	}
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.dashboardRoutes()
	s.notebookRoutes()
	s.mux.Handle("/", s.wrap(route{path: "other", handler: s.noRoute}))
	return s
}

// noRoute answers 405 (with Allow) when the path exists for other methods,
// else 404. The path is matched as sent, escaped, as the mux matches it:
// an escaped slash (/queue%2FID) is part of a segment, not a separator,
// so such a path is no route's (404), not one for another method.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.EscapedPath()
	var allow []string
	for _, rt := range s.routes {
		if pathMatches(rt.path, path) && rt.method != r.Method {
			allow = append(allow, rt.method)
		}
	}
	if len(allow) == 0 {
		return api.NotFound("no route %s %s", r.Method, truncate(path, 200))
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return &api.Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Message: fmt.Sprintf("%s %s is not allowed; use %s", r.Method, truncate(path, 200), strings.Join(allow, " or "))}
}

// pathMatches reports whether path fits a route pattern with {wildcards}.
func pathMatches(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if ps[i] != qs[i] && !(strings.HasPrefix(ps[i], "{") && qs[i] != "") {
			return false
		}
	}
	return true
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// wrap adds the request id, logging, metrics, panic recovery,
// authentication and authorization, the audit record and the error answer
// around a handler.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 || !printable(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		call := &callInfo{action: rt.action, requestID: id, start: start}
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK, call: call, stall: s.conns.writeStall()}
		// What is still buffered (a stream's last chunk) is written once
		// this returns, perhaps long after the handler's last write.
		defer rw.extend()
		log := s.log.With("request_id", id, "method", r.Method, "path", r.URL.Path)
		probe := &bodyProbe{ReadCloser: http.MaxBytesReader(rw, r.Body, MaxBodyBytes)}
		r.Body = probe
		r = r.WithContext(context.WithValue(r.Context(), callKey{}, call))
		var errCode, errText string
		func() {
			defer func() {
				if p := recover(); p != nil {
					log.Error("panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					errCode = "internal"
					if !rw.wrote {
						writeError(rw, &api.Error{Status: 500, Code: "internal", Message: "internal error; see the server log for request " + id})
					}
				}
			}()
			err := s.authorize(rt, r, call)
			if err == nil {
				err = checkQuery(r)
			}
			if err == nil {
				err = rt.handler(rw, r)
			}
			if err != nil {
				e := api.AsError(err)
				errCode = e.Code
				switch {
				case e.Code == storeUnavailable:
					// A refusal while the store cannot write: the
					// request's own line says so, at warn (one line).
					errText = e.Message
				case e.Status >= 500:
					log.Error("request failed", "err", err)
				}
				if !rw.wrote {
					if e.Status == http.StatusRequestEntityTooLarge {
						drainOversized(rw, r) // conns.go: the caller may read its 413
					}
					// A refusal before the body was read (no token, say)
					// neither waits for the body nor keeps the connection.
					endRead := refuseUnread(rw, r, probe)
					writeError(rw, e)
					endRead()
				}
			}
		}()
		if rt.action != "" && !call.audited {
			s.record(r, rt, call, rw.status, errCode, id, start)
		}
		elapsed := time.Since(start)
		s.metrics.observe(rt.method+" "+rt.path, rw.status, elapsed)
		attrs := []any{"route", rt.path, "status", rw.status, "user", call.who.User, "ms", float64(elapsed.Microseconds()) / 1000}
		if call.target != "" {
			// What it acted on: a submission's one info line names its job.
			attrs = append(attrs, "target", call.target)
		}
		level := requestLevel(r.Method, rt.path, rw.status)
		if errText != "" {
			level, attrs = slog.LevelWarn, append(attrs, "code", errCode, "err", errText)
		}
		log.Log(r.Context(), level, "request", attrs...)
	})
}

// storeUnavailable is the error code of a change refused because the
// store cannot write (orchestrator/storedown.go).
const storeUnavailable = "store_unavailable"

// requestLevel is the level a request is logged at: info for changes and
// failures, debug for reads and the agents' protocol (a steady stream).
func requestLevel(method, path string, status int) slog.Level {
	switch {
	case strings.HasPrefix(path, "/agent/") && status < 500:
		return slog.LevelDebug
	case method != http.MethodGet || status >= 400:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// checkQuery refuses a query string whose names or values are not valid
// UTF-8 (422 naming the parameter), as decode refuses such a body.
func checkQuery(r *http.Request) error {
	for k, vs := range r.URL.Query() {
		if !utf8.ValidString(k) {
			return api.Invalid("query", "a parameter name is not valid UTF-8")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return api.Invalid(k, "is not valid UTF-8")
			}
		}
	}
	return nil
}

// printable reports whether s is printable ASCII, as a request id that
// is echoed back and logged must be.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	// call and stall: once call.authed, each write may stall at most
	// stall (the server's WriteTimeout, then counted per write: streams
	// and long polls last while they are read). 0: the server's own.
	call  *callInfo
	stall time.Duration
}

// extend moves the write deadline of an authenticated caller's answer to
// stall from now.
func (w *statusWriter) extend() {
	if w.stall > 0 && w.call != nil && w.call.authed {
		http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.stall))
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	w.extend()
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	w.wrote = true
	w.extend()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	if e.Code == "" {
		e.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(e.Status), " ", "_"))
	}
	writeJSON(w, e.Status, api.ErrorBody{Error: api.ErrorDetail{Code: e.Code, Message: e.Message, Field: e.Field}})
}

// decode reads a JSON body into v strictly: one object, known fields only,
// each key once, every string valid UTF-8 (checkJSON), at most
// MaxBodyBytes. Its errors name the field where there is one.
//
// A body that says it is larger (Content-Length) is refused before any of
// it is read or any buffer is made for it (11,816 oversized
// bodies, each read to the limit, added 200 MB).
func decode(r *http.Request, v any) error {
	if r.ContentLength > MaxBodyBytes {
		return tooLarge(MaxBodyBytes)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err)
	}
	if err := checkJSON(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return api.BadRequest("malformed_json", "", "the body holds more than one JSON value")
	}
	return nil
}

// tooLarge is the 413 of a body past limit bytes.
func tooLarge(limit int64) *api.Error {
	return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: fmt.Sprintf("the body is larger than %d bytes", limit)}
}

func decodeError(err error) error {
	var maxErr *http.MaxBytesError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &maxErr):
		return tooLarge(maxErr.Limit)
	case errors.Is(err, io.EOF):
		return api.BadRequest("malformed_json", "", "the body is empty; send a JSON object")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return api.BadRequest("malformed_json", "", "the body is not valid JSON: %v", err)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return api.BadRequest("malformed_json", "", "the body must be a JSON object, not %s", typeErr.Value)
		}
		return api.Invalid(field, "must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return api.BadRequest("unknown_field", field, "unknown field %q", field)
	}
	return api.BadRequest("malformed_json", "", "the body could not be read: %v", err)
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "true or false"
	case goKind == "map", goKind == "struct":
		return "an object"
	case goKind == "slice":
		return "an array"
	}
	return goKind
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	if s.leaderAddr != "" {
		return writeJSON(w, http.StatusOK, Health{Status: "ok", Role: "leader", Leader: s.leaderAddr, Self: s.leaderAddr})
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// WithLeaderAddress marks a server that leads others on one database
// (fail-over): /healthz answers role "leader" and its address.
func WithLeaderAddress(self string) Option {
	return func(s *Server) { s.leaderAddr = self }
}

func (s *Server) prometheus(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}

// Registry exposes the metrics registry (for tests and embedding).
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }
