package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/client"
)

// fakeLoginServer answers an agent's registration and its node logins as
// the server does (join token, node session), recording the logins.
type fakeLoginServer struct {
	*httptest.Server
	disabled bool // answer as a server without --login-from-agents

	mu     sync.Mutex
	logins []api.NodeLoginRequest
}

const testJoin = "join-secret"

func newFakeLoginServer(t *testing.T, disabled bool) *fakeLoginServer {
	f := &fakeLoginServer{disabled: disabled}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agent/v1/register", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.AgentConfig{Session: "sess-1"})
	})
	mux.HandleFunc("POST /auth/login/node", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testJoin || r.Header.Get(api.AgentSessionHeader) != "sess-1" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "unauthorized", Message: "no node credentials"}})
			return
		}
		if f.disabled {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "login_disabled", Message: "this server signs no one in through agents (start it with --login-from-agents)"}})
			return
		}
		var req api.NodeLoginRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.logins = append(f.logins, req)
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.LoginAnswer{NewToken: api.NewToken{Token: api.Token{ID: "tok-1", User: req.User, Role: api.RoleUser}, Secret: "corral_secret"}})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLoginServer) seen() []api.NodeLoginRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.NodeLoginRequest(nil), f.logins...)
}

// loginAgent is an agent of node n1 whose login socket is served, with
// the policy given, linked to srv.
func loginAgent(t *testing.T, ctx context.Context, srv string, policy auth.LocalPolicy) (*Agent, string) {
	t.Helper()
	link, err := NewHTTPLink(srv, testJoin, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "login.sock")
	a, err := New(Config{NodeID: "n1", Link: link, StateDir: filepath.Join(dir, "state"), LogDir: filepath.Join(dir, "logs"),
		Login:  LoginSocketConfig{Path: sock, Explicit: true, Policy: policy, RegisterWait: 100 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(a.cfg.StateDir, 0o700)
	if err := a.serveLogin(ctx); err != nil {
		t.Fatal(err)
	}
	return a, sock
}

// TestAgentLoginSocket: a local user's sign-in through the agent's socket
// is forwarded to the server with the node's credentials and the caller's
// account from the kernel; the policy, the server's refusal, an agent not
// yet registered and an unreachable server each end it with their reason.
func TestAgentLoginSocket(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	allowMe := auth.LocalPolicy{AllowRoot: true} // whoever runs the test, root included
	for name, tc := range map[string]struct {
		policy     auth.LocalPolicy
		disabled   bool // the server runs without --login-from-agents
		unregister bool // the agent has not registered yet
		down       bool // the server is gone
		wantStatus int
		wantCode   string
	}{
		"signed in":            {policy: allowMe, wantStatus: http.StatusCreated},
		"not in the group":     {policy: auth.LocalPolicy{AllowRoot: true, Group: "no-such-group-crl"}, wantStatus: http.StatusForbidden, wantCode: "login_refused"},
		"server refuses":       {policy: allowMe, disabled: true, wantStatus: http.StatusForbidden, wantCode: "login_disabled"},
		"not registered":       {policy: allowMe, unregister: true, wantStatus: http.StatusServiceUnavailable, wantCode: "agent_not_registered"},
		"server not reachable": {policy: allowMe, down: true, wantStatus: http.StatusBadGateway, wantCode: "server_unreachable"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := newFakeLoginServer(t, tc.disabled)
			a, sock := loginAgent(t, ctx, srv.URL, tc.policy)
			if !tc.unregister {
				if err := a.register(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if tc.down {
				srv.Close()
			}
			ans, err := client.SocketLogin(ctx, sock, api.LoginRequest{Client: "laptop"})
			if tc.wantStatus == http.StatusCreated {
				if err != nil {
					t.Fatal(err)
				}
				if ans.User != me.Username || ans.Secret != "corral_secret" || ans.Server != srv.URL {
					t.Errorf("answer %+v; want user %s, the secret, server %s", ans, me.Username, srv.URL)
				}
				want := api.NodeLoginRequest{NodeID: "n1", User: me.Username, UID: os.Getuid()}
				if got := srv.seen(); len(got) != 1 || got[0] != want {
					t.Errorf("the server saw %+v; want %+v", got, want)
				}
				return
			}
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != tc.wantStatus || ae.Code != tc.wantCode {
				t.Fatalf("got %v (%#v); want %d %s", err, ae, tc.wantStatus, tc.wantCode)
			}
			if n := len(srv.seen()); n != 0 {
				t.Errorf("the server signed in %d users", n)
			}
		})
	}
}

// TestAgentLoginSocketPath: a socket that cannot be served stops the
// agent when its path was named, and is skipped otherwise; no path, or a
// link that cannot sign users in (corral up's), serves none.
func TestAgentLoginSocketPath(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "not-a-socket")
	os.WriteFile(taken, nil, 0o600)
	link, _ := NewHTTPLink("http://127.0.0.1:1", testJoin, "")
	for name, tc := range map[string]struct {
		link    Link
		login   LoginSocketConfig
		wantErr bool
	}{
		"named, taken":       {link, LoginSocketConfig{Path: taken, Explicit: true}, true},
		"default, taken":     {link, LoginSocketConfig{Path: taken}, false},
		"off":                {link, LoginSocketConfig{}, false},
		"link without login": {fakeLink{}, LoginSocketConfig{Path: filepath.Join(dir, "none.sock"), Explicit: true}, false},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := New(Config{NodeID: "n1", Link: tc.link, StateDir: dir, LogDir: dir, Login: tc.login,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			err = a.serveLogin(t.Context())
			if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "--login-socket "+taken)) {
				t.Errorf("serveLogin: %v; want an error: %v", err, tc.wantErr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "none.sock")); err == nil {
		t.Error("an agent whose link cannot sign users in made a login socket")
	}
}
