package server

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// access is who may call a route.
type access int

const (
	public access = iota // anyone, no token
	agent                // agents, with the join token (checked by the handler)
	viewer               // any valid token
	user                 // user or admin tokens; the handler checks ownership
	admin                // admin tokens only
)

// role is the least role an access level needs.
func (a access) role() api.Role {
	switch a {
	case viewer:
		return api.RoleViewer
	case user:
		return api.RoleUser
	}
	return api.RoleAdmin
}

// Dashboard sessions: the cookie holds the token itself (HttpOnly, so the
// page's scripts never see it; SameSite=Strict, so other sites' pages do
// not send it). Calls that change something and come with the cookie must
// also carry csrfHeader, which a cross-site form or fetch cannot add
// without a CORS preflight this server never grants, and an Origin, when
// the browser sends one, of this server.
const (
	sessionCookie = "corral_session"
	csrfHeader    = "X-Corral-Request"
	sessionMaxAge = 30 * 24 * time.Hour
)

// callKey is the context key of a request's *callInfo.
type callKey struct{}

// callInfo is what the middleware learns about a call: who made it, and
// what a handler names as its target, for the audit trail.
type callInfo struct {
	who    auth.Principal
	target string
	// audited: the handler had the call's audit entry written with its
	// change (a submission's, in the job's transaction); the middleware
	// does not write it again.
	audited bool
	// action, requestID and start are the call's, for its audit entry.
	action    string
	requestID string
	start     time.Time
	// authed: the caller presented a valid token (Server.authenticated).
	authed bool
}

// principal returns the caller of an authenticated request.
func principal(r *http.Request) auth.Principal {
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		return c.who
	}
	return auth.Principal{}
}

// setTarget names what the call acted on (a new job's id), for the audit.
func setTarget(r *http.Request, target string) {
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		c.target = target
	}
}

// authorize authenticates the caller of rt (bearer token, else the
// dashboard's cookie) and checks its role; it fills call.who.
func (s *Server) authorize(rt route, r *http.Request, call *callInfo) error {
	if rt.access == public || rt.access == agent {
		return nil
	}
	p, err := s.authenticate(r)
	if err != nil {
		return err
	}
	s.authenticated(r)
	call.who = p
	if p.Session && mutating(r.Method) {
		if err := checkCSRF(r); err != nil {
			return err
		}
	}
	if !p.Role.AtLeast(rt.access.role()) {
		return api.Forbidden("forbidden", roleRefusal(rt, p.User, string(p.Role), string(rt.access.role()))) // commands.go
	}
	return nil
}

// authenticate reads the caller's token: the Authorization header, else
// the session cookie.
func (s *Server) authenticate(r *http.Request) (auth.Principal, error) {
	if s.auth == nil {
		return auth.Principal{}, api.Unauthorized("unauthenticated", "this server has no tokens configured")
	}
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return auth.Principal{}, api.Unauthorized("bad_token", "the Authorization header must be \"Bearer TOKEN\"")
		}
		return s.auth.Authenticate(strings.TrimSpace(tok))
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		p, err := s.auth.Authenticate(c.Value)
		if err != nil {
			return p, api.Unauthorized("session_ended", "the dashboard session has ended (the token was revoked or has expired); sign in again")
		}
		p.Session = true
		return p, nil
	}
	return s.auth.Authenticate("")
}

func mutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// checkCSRF guards a cookie-authenticated call that changes something.
func checkCSRF(r *http.Request) error {
	if r.Header.Get(csrfHeader) == "" {
		return api.Forbidden("csrf", "a dashboard session's changes must carry the "+csrfHeader+" header")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return api.Forbidden("csrf", "the request comes from another origin")
		}
	}
	return nil
}

// record writes the audit entry of a call to a mutating route.
func (s *Server) record(r *http.Request, rt route, call *callInfo, status int, errCode, requestID string, at time.Time) {
	if s.auth == nil {
		return
	}
	e := auditEntry(r, rt.action, call.who, call.target, status, errCode, requestID, at)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	s.audits.record(ctx, e) // while the store cannot write, kept in memory (auditspool.go)
}

// auditEntry is the audit entry of a call to the route whose action is
// action, answered with status (and errCode when it failed). It only
// reads r, so it may run on another goroutine while the handler waits.
func auditEntry(r *http.Request, action string, who auth.Principal, target string, status int, errCode, requestID string, at time.Time) api.AuditEntry {
	if i := strings.Index(action, "{"); i >= 0 {
		if j := strings.Index(action[i:], "}"); j > 0 {
			v := r.PathValue(action[i+1 : i+j])
			if len(v) > 32 {
				v = v[:32]
			}
			action = action[:i] + v + action[i+j+1:]
		}
	}
	for _, name := range []string{"job_id", "node_id", "id"} {
		if v := r.PathValue(name); target == "" && v != "" {
			target = v
		}
	}
	if len(target) > 256 {
		target = target[:256]
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	e := api.AuditEntry{At: at.UTC(), User: who.User, Role: who.Role, TokenID: who.TokenID,
		Action: action, Method: r.Method, Path: clipPath(r.URL.Path), Target: target, Remote: host, Status: status, RequestID: requestID}
	if status >= 400 {
		e.Error = errCode
	}
	return e
}

// submitAudit hands a submission's audit entry to the orchestrator, to be
// written in the job's own transaction: the entry the middleware would
// write after the handler, with the status and error code the handler's
// outcome is answered with (201, or the refusal's).
func (s *Server) submitAudit(r *http.Request) *orchestrator.SubmitAudit {
	call, ok := r.Context().Value(callKey{}).(*callInfo)
	if s.auth == nil || !ok || call.action == "" {
		return nil
	}
	action, who, requestID, start := call.action, call.who, call.requestID, call.start
	return &orchestrator.SubmitAudit{Entry: func(target string, err error) api.AuditEntry {
		status, code := http.StatusCreated, ""
		if err != nil {
			e := api.AsError(err)
			status, code = e.Status, e.Code
		}
		return auditEntry(r, action, who, target, status, code, requestID, start)
	}}
}

// audited tells the middleware that the call's audit entry is written.
func audited(r *http.Request) {
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		c.audited = true
	}
}

func clipPath(p string) string {
	if len(p) > 512 {
		return p[:512]
	}
	return p
}

// rateLimiter is a token bucket per user: rate tokens a second, up to
// burst; each submission takes one.
type rateLimiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64, burst int, now func() time.Time) *rateLimiter {
	if rate <= 0 {
		return nil
	}
	return &rateLimiter{rate: rate, burst: float64(max(burst, 1)), now: now, buckets: map[string]*bucket{}}
}

// allow takes a token of user's bucket; when there is none it reports how
// long until there is.
func (l *rateLimiter) allow(user string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[user]
	if !ok {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[user] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// checkRate answers 429 with Retry-After when p's submissions are over
// the rate. Admins are exempt.
func (s *Server) checkRate(w http.ResponseWriter, p auth.Principal) error {
	if p.IsAdmin() {
		return nil
	}
	ok, wait := s.limiter.allow(p.User)
	if ok {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	return &api.Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: fmt.Sprintf("%s is submitting faster than %g jobs a second; retry in %ds", p.User, s.limiter.rate, max(secs, 1))}
}
