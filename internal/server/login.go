package server

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/web"
)

// Signing in without handing out secrets (docs/team.md, "Signing in";
// api/login.go): the login socket's tokens (LoginSocket), the device
// flow, invites, an agent vouching for its node's users, and logout.

// LoginConfig is how the server signs people in.
type LoginConfig struct {
	// TTL is how long a login token works (0: auth.DefaultLoginTTL).
	TTL time.Duration
	// FromAgents lets agents sign in their node's local users
	// (POST /auth/login/node): whoever holds the join token may then
	// get a user token for any name but root's. Off by default.
	FromAgents bool
	// Host names this machine in the login key of socket tokens.
	Host string
}

// WithLogin sets how the server signs people in; without it, the
// defaults (30-day tokens, no sign-in through agents).
func WithLogin(c LoginConfig) Option {
	return func(s *Server) { s.login = c }
}

// loginRoutes are the sign-in routes; they also serve the dashboard's
// page that approves a device code (GET /login/device).
func (s *Server) loginRoutes() []route {
	s.devices = auth.NewDevices(nil)
	s.mux.Handle("GET /login/device", s.wrap(route{method: "GET", path: "/login/device", handler: s.devicePage}))
	return []route{
		{method: "POST", path: "/auth/device", summary: "Start a device sign-in: codes for corral login SERVER (no token)", handler: s.deviceStart, access: public, action: "login.device.start"},
		{method: "POST", path: "/auth/device/token", summary: "Poll a device sign-in: 409 until approved, then its token once (no token)", handler: s.deviceToken, access: public, action: "login.device"},
		{method: "POST", path: "/auth/device/approve", summary: "Approve a device sign-in's user code: its CLI gets a token of the caller", handler: s.deviceApprove, access: viewer, action: "login.device.approve"},
		{method: "POST", path: "/auth/invites", summary: "Make a single-use, expiring invite for a user; its code is shown once (admin)", handler: s.createInvite, access: admin, action: "invite.create"},
		{method: "POST", path: "/auth/invites/redeem", summary: "Redeem an invite's code for a token of its user (no token)", handler: s.redeemInvite, access: public, action: "login.invite"},
		{method: "POST", path: "/auth/login/node", summary: "Agent protocol: sign in a local user of the agent's node (join token and node session; --login-from-agents)", handler: s.nodeLogin, access: agent, action: "login.node"},
		{method: "POST", path: "/auth/logout", summary: "Revoke a token its holder presents, in the body (token) or as the bearer token (corral logout)", handler: s.logout, access: public, action: "login.logout"},
	}
}

// signedIn names the principal a sign-in made as the call's, for its
// audit entry and log line.
func signedIn(r *http.Request, t api.NewToken) {
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		c.who = auth.Principal{TokenID: t.ID, User: t.User, Role: t.Role}
		c.target = t.ID
	}
}

func (s *Server) needAuth() error {
	if s.auth == nil {
		return api.Unauthorized("unauthenticated", "this server has no tokens configured")
	}
	return nil
}

// deviceStart is POST /auth/device.
func (s *Server) deviceStart(w http.ResponseWriter, r *http.Request) error {
	if err := s.needAuth(); err != nil {
		return err
	}
	user, device, expires, err := s.devices.Start()
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, api.DeviceStart{UserCode: user, DeviceCode: device,
		VerificationURI: scheme + "://" + r.Host + "/login/device", Interval: int(auth.DeviceInterval / time.Second),
		ExpiresIn: int(time.Until(expires).Round(time.Second) / time.Second)})
}

// deviceToken is POST /auth/device/token.
func (s *Server) deviceToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.needAuth(); err != nil {
		return err
	}
	var req api.DeviceTokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.DeviceCode == "" {
		return api.Invalid("device_code", "is required")
	}
	p, err := s.devices.Poll(req.DeviceCode)
	if err != nil {
		return err
	}
	t, _, err := s.auth.Login(r.Context(), auth.Grant{User: p.User, Role: p.Role, Projects: p.Projects, ProjectAdmin: p.ProjectAdmin,
		Login: "device:" + auth.ClientKey(req.Client), TTL: s.login.TTL, NotAfter: p.ExpiresAt, By: p.User})
	if err != nil {
		return err
	}
	signedIn(r, t)
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, api.LoginAnswer{NewToken: t})
}

// deviceApprove is POST /auth/device/approve.
func (s *Server) deviceApprove(w http.ResponseWriter, r *http.Request) error {
	var req api.DeviceApproveRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.UserCode == "" {
		return api.Invalid("user_code", "is required")
	}
	p := principal(r)
	if err := s.devices.Approve(req.UserCode, p); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.DeviceApproved{User: p.User, Role: p.Role})
}

// createInvite is POST /auth/invites: the answer holds the code, once.
func (s *Server) createInvite(w http.ResponseWriter, r *http.Request) error {
	var req api.InviteRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	inv, err := s.auth.CreateInvite(r.Context(), req, principal(r))
	if err != nil {
		return err
	}
	setTarget(r, inv.ID)
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, inv)
}

// redeemInvite is POST /auth/invites/redeem.
func (s *Server) redeemInvite(w http.ResponseWriter, r *http.Request) error {
	if err := s.needAuth(); err != nil {
		return err
	}
	var req api.InviteRedeemRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t, _, err := s.auth.RedeemInvite(r.Context(), req.Code, req.Client, s.login.TTL)
	if err != nil {
		return err
	}
	signedIn(r, t)
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, api.LoginAnswer{NewToken: t})
}

// nodeLogin is POST /auth/login/node: an agent signs in a local user of
// its node, whose uid it checked with SO_PEERCRED. The server trusts the
// agent (join token and the node's session) for the accounts of its own
// node, never for root, and only with --login-from-agents.
func (s *Server) nodeLogin(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	if err := s.needAuth(); err != nil {
		return err
	}
	var req api.NodeLoginRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.sessions.check(req.NodeID, r.Header.Get(api.AgentSessionHeader)); err != nil {
		return err
	}
	if !s.login.FromAgents {
		return api.Forbidden("login_disabled", "this server signs no one in through agents (start it with --login-from-agents); sign in on the server's machine, or with corral login SERVER")
	}
	switch {
	case !auth.ValidName(req.User):
		return api.Invalid("user", "%q is not a valid user name", truncate(req.User, 40))
	case req.UID == 0 || req.User == "root":
		return api.Forbidden("login_refused", "root is never signed in through an agent")
	}
	t, _, err := s.auth.Login(r.Context(), auth.Grant{User: req.User, Login: "node:" + auth.ClientKey(req.NodeID),
		TTL: s.login.TTL, By: "agent " + clipID(req.NodeID)})
	if err != nil {
		return err
	}
	signedIn(r, t)
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, api.LoginAnswer{NewToken: t})
}

// logout is POST /auth/logout: the token in the body, else the bearer
// token, stops working (holding a token is the right to end it). The
// bootstrap admin token is not revoked this way (its file keeps it).
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	if err := s.needAuth(); err != nil {
		return err
	}
	var req api.SessionRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	if req.Token == "" {
		req.Token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	p, err := s.auth.Authenticate(strings.TrimSpace(req.Token))
	if err != nil {
		return err
	}
	if c, ok := r.Context().Value(callKey{}).(*callInfo); ok {
		c.who = p
	}
	if p.TokenID == auth.BootstrapID {
		return api.Conflict("bootstrap_token", "the bootstrap admin token is not revoked by logging out (corral token revoke "+auth.BootstrapID+" does)")
	}
	t, err := s.auth.Revoke(r.Context(), p.TokenID)
	if err != nil {
		return err
	}
	setTarget(r, t.ID)
	return writeJSON(w, http.StatusOK, t)
}

// LoginSocket returns the login socket's server for this API: it signs
// a local caller in as their own account (policy says who may), issuing
// the token itself and recording it in the audit trail. serverURL is the
// address clients should use, given to `corral login` as the default
// server.
func (s *Server) LoginSocket(policy auth.LocalPolicy, serverURL string) (*auth.LoginSocket, error) {
	if err := s.needAuth(); err != nil {
		return nil, err
	}
	host := s.login.Host
	if host == "" {
		host = "local"
	}
	issue := func(ctx context.Context, c auth.Cred, user string, req api.LoginRequest) (api.LoginAnswer, error) {
		start := time.Now()
		t, replaced, err := s.auth.Login(ctx, auth.Grant{User: user, Login: "socket:" + host, TTL: s.login.TTL, By: "login-socket"})
		e := api.AuditEntry{At: start.UTC(), User: user, Role: api.RoleUser, TokenID: t.ID, Action: "login.socket",
			Method: http.MethodPost, Path: "/login", Target: t.ID, Remote: fmt.Sprintf("unix:uid=%d,pid=%d", c.UID, c.PID), Status: http.StatusCreated}
		if replaced != "" {
			e.Target += " (replaces " + replaced + ")"
		}
		if err != nil {
			e.Status, e.Error = api.AsError(err).Status, api.AsError(err).Code
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if aerr := s.auth.Record(actx, e); aerr != nil {
			s.log.Error("audit: could not record a socket login", "err", aerr, "user", user)
		}
		if err != nil && t.Secret == "" {
			return api.LoginAnswer{}, err
		}
		return api.LoginAnswer{NewToken: t, Server: serverURL}, nil
	}
	return &auth.LoginSocket{Policy: policy, Issue: issue, Log: s.log.With("part", "login-socket")}, nil
}

// devicePage is GET /login/device: the dashboard's page that approves a
// device sign-in (web/static/device.html).
func (s *Server) devicePage(w http.ResponseWriter, r *http.Request) error {
	page, err := fs.ReadFile(web.Static, "static/device.html")
	if err != nil {
		return err
	}
	dashboardHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(page)))
	_, err = w.Write(page)
	return err
}
