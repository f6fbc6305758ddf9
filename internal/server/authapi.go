package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/store"
)

// createToken is POST /auth/tokens: the answer holds the secret, once.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req api.TokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t, err := s.auth.Create(r.Context(), req, principal(r))
	if err != nil {
		return err
	}
	setTarget(r, t.ID)
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, t)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, api.TokenList{Tokens: s.auth.List()})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	t, err := s.auth.Revoke(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t)
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, principal(r).Whoami())
}

// createSession is POST /auth/session: the dashboard's sign-in. The token
// comes in the body (or as a bearer token); the answer sets the session
// cookie, in place of any session the browser had.
//
// A call without an Authorization header is a browser's, so it must pass
// the dashboard's CSRF check (checkCSRF): a page of another site cannot
// sign its visitor in as someone else (login CSRF). The dashboard makes
// this call only when its user presses a button that names the user
// they sign in as.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var req api.SessionRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	browser := r.Header.Get("Authorization") == ""
	if req.Token == "" {
		req.Token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if s.auth == nil {
		return api.Unauthorized("unauthenticated", "this server has no tokens configured")
	}
	p, err := s.auth.Authenticate(strings.TrimSpace(req.Token))
	if err != nil {
		return err
	}
	if browser {
		if err := checkCSRF(r); err != nil {
			return err
		}
	}
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		c.who = p
	}
	setSessionCookie(w, r, strings.TrimSpace(req.Token), p.ExpiresAt)
	p.Session = true
	return writeJSON(w, http.StatusOK, p.Whoami())
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setSessionCookie sets the dashboard's session cookie: it lasts
// sessionMaxAge, or until the token expires when that is sooner.
func setSessionCookie(w http.ResponseWriter, r *http.Request, token string, expires *time.Time) {
	age := sessionMaxAge
	if expires != nil {
		age = min(age, time.Until(*expires))
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", MaxAge: max(int(age.Seconds()), 1),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// audit is GET /audit?user=&action=&since=&limit=&before=.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := store.AuditFilter{User: q.Get("user"), Action: q.Get("action"), Limit: 1000}
	if len(f.User) > 256 || len(f.Action) > 256 {
		return api.Invalid("user", "filters are at most 256 characters")
	}
	since, limit, err := sinceLimit(q)
	if err != nil {
		return err
	}
	f.Since = since
	if limit > 0 {
		f.Limit = limit
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return api.Invalid("before", "must be a positive sequence number")
		}
		f.Before = n
	}
	entries, err := s.auth.Audit(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.AuditList{Entries: entries})
}

// mayActOn answers 403 unless p may change a job or hold of owner in
// project.
func mayActOn(p auth.Principal, what, id, owner, project string) error {
	if p.CanActOn(owner, project) {
		return nil
	}
	if p.Role == api.RoleViewer {
		return api.Forbidden("forbidden", "viewer tokens cannot change anything")
	}
	return api.Forbidden("not_owner", what+" "+id+" belongs to "+owner+" (project "+project+"); "+p.User+
		" may act only on their own, on projects they administer, or with an admin token")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
