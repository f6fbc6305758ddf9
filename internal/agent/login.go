package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
)

// The agent's login socket (docs/team.md, "Nodes that run only corral
// agent"): a local user's `corral login` on a node that runs only `corral
// agent` connects to the agent's Unix socket; the kernel tells the agent
// who connected (SO_PEERCRED), the socket's policy says whether that
// account may sign in (never root unless allowed, a group when set), and
// the agent asks its server for the user's token with the node's own
// credentials (POST /auth/login/node: the join token and the node's
// session). The server signs the user in only when it runs with
// --login-from-agents.
//
//	corral login ──unix socket──▶ agent (SO_PEERCRED → account, policy)
//	                                └─ POST /auth/login/node {node_id, user, uid} ─▶ server
//	corral login ◀── {token, server} ─┘

// LoginSocketConfig is the agent's login socket.
type LoginSocketConfig struct {
	// Path is where the socket is; "" serves none.
	Path string
	// Explicit says the path was named (--login-socket): a socket that
	// cannot be served there stops the agent. The default path is only
	// warned about (another agent or a server on the machine may hold it).
	Explicit bool
	// Policy says which local accounts may sign in.
	Policy auth.LocalPolicy
	// RegisterWait bounds how long a sign-in waits for the agent's first
	// registration (the node's session, which the server asks for);
	// 0: 20 seconds.
	RegisterWait time.Duration
}

// NodeLoginer is the part of a Link that signs a local user of the node
// in (HTTPLink has it; the in-process agent of `corral up` has none: its
// server serves the login socket itself).
type NodeLoginer interface {
	NodeLogin(ctx context.Context, r api.NodeLoginRequest) (api.LoginAnswer, error)
}

// NodeLogin implements NodeLoginer: the node's credentials vouch for a
// local account. The answer's Server is the address that answered.
func (l *HTTPLink) NodeLogin(ctx context.Context, r api.NodeLoginRequest) (api.LoginAnswer, error) {
	var ans api.LoginAnswer
	if err := l.post(ctx, "/auth/login/node", r, &ans, 30*time.Second); err != nil {
		return api.LoginAnswer{}, err
	}
	ans.Server = l.current()
	return ans, nil
}

// defaultRegisterWait is LoginSocketConfig.RegisterWait's default.
const defaultRegisterWait = 20 * time.Second

// serveLogin starts the login socket of cfg.Login, served until ctx ends.
// It is an error only for a path that was named; the default path is
// skipped with a warning when it cannot be served.
func (a *Agent) serveLogin(ctx context.Context) error {
	lc := a.cfg.Login
	if lc.Path == "" {
		return nil
	}
	nl, ok := a.cfg.Link.(NodeLoginer)
	if !ok {
		return nil
	}
	ln, err := auth.ListenLoginSocket(lc.Path)
	if err != nil {
		if lc.Explicit {
			return fmt.Errorf("--login-socket %s: %w", lc.Path, err)
		}
		a.log.Warn("no login socket: corral login on this node will not work through this agent (set --login-socket)", "err", err)
		return nil
	}
	ls := &auth.LoginSocket{Policy: lc.Policy, Issue: a.issueLogin(nl), Log: a.log.With("part", "login-socket")}
	go func() {
		if err := ls.Serve(ctx, ln); err != nil {
			a.log.Error("login socket stopped", "err", err, "path", lc.Path)
		}
	}()
	who := "every local account but root"
	if lc.Policy.AllowRoot {
		who = "every local account"
	}
	if lc.Policy.Group != "" {
		who = "the members of group " + lc.Policy.Group
	}
	a.log.Info("login socket: local users sign in with corral login", "path", lc.Path, "for", who)
	return nil
}

// issueLogin asks the server, through nl, for the token of a local
// account the socket's policy accepted.
func (a *Agent) issueLogin(nl NodeLoginer) auth.IssueFunc {
	return func(ctx context.Context, c auth.Cred, user string, _ api.LoginRequest) (api.LoginAnswer, error) {
		wait := a.cfg.Login.RegisterWait
		if wait <= 0 {
			wait = defaultRegisterWait
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-a.registered:
		case <-ctx.Done():
			return api.LoginAnswer{}, ctx.Err()
		case <-t.C:
			return api.LoginAnswer{}, &api.Error{Status: http.StatusServiceUnavailable, Code: "agent_not_registered",
				Message: "this node's agent has not registered with its server yet; try again when it has"}
		}
		ans, err := nl.NodeLogin(ctx, api.NodeLoginRequest{NodeID: a.cfg.NodeID, User: user, UID: int(c.UID)})
		if errors.Is(err, ErrUnknownNode) {
			return api.LoginAnswer{}, &api.Error{Status: http.StatusServiceUnavailable, Code: "agent_not_registered",
				Message: "this node's agent is registering with its server again; try again in a moment"}
		}
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) {
				var ne net.Error
				code := "agent_login_failed"
				if errors.As(err, &ne) {
					code = "server_unreachable"
				}
				return api.LoginAnswer{}, &api.Error{Status: http.StatusBadGateway, Code: code,
					Message: fmt.Sprintf("this node's agent could not reach its server: %v", err)}
			}
			return api.LoginAnswer{}, err
		}
		return ans, nil
	}
}
