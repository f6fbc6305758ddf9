package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/store"
)

// loginPlaceholders fills a body's sign-in placeholders with fresh
// credentials: {user_code} a pending device code, {invite} an invite's
// code, {fresh_token} a token of zed's.
func (e *authEnv) loginPlaceholders(body string) string {
	e.t.Helper()
	if strings.Contains(body, "{user_code}") {
		resp, b := e.do("anon", "POST", "/auth/device", "", nil)
		var d api.DeviceStart
		if err := json.Unmarshal(b, &d); err != nil || resp.StatusCode != 200 {
			e.t.Fatalf("POST /auth/device: %d %s", resp.StatusCode, b)
		}
		body = strings.Replace(body, "{user_code}", d.UserCode, 1)
	}
	if strings.Contains(body, "{invite}") {
		inv, err := e.a.CreateInvite(context.Background(), api.InviteRequest{User: "dan"}, auth.Principal{User: "root", Role: api.RoleAdmin})
		if err != nil {
			e.t.Fatal(err)
		}
		body = strings.Replace(body, "{invite}", inv.Code, 1)
	}
	if strings.Contains(body, "{fresh_token}") {
		nt, err := e.a.Create(context.Background(), api.TokenRequest{User: "zed"}, auth.Principal{User: "root", Role: api.RoleAdmin})
		if err != nil {
			e.t.Fatal(err)
		}
		body = strings.Replace(body, "{fresh_token}", nt.Secret, 1)
	}
	return body
}

// TestDeviceFlow: the CLI's codes, approved by a signed-in user (a
// token here; the dashboard's cookie in the e2e test), give the CLI a
// token of that user once; a wrong code approves nothing; polling before
// the approval is pending; signing in again from the same client
// replaces the first token.
func TestDeviceFlow(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	anon := client.New(e.url)
	alice := client.New(e.url, client.WithToken(e.tokens["owner"]))
	signIn := func() api.LoginAnswer {
		t.Helper()
		d, err := anon.StartDevice(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(d.VerificationURI, "/login/device") || len(d.UserCode) != 9 || d.Interval < 1 || d.ExpiresIn < 60 {
			t.Fatalf("device start: %+v", d)
		}
		_, err = anon.DeviceToken(ctx, api.DeviceTokenRequest{DeviceCode: d.DeviceCode})
		if ae := api.AsError(err); ae.Status != http.StatusConflict || ae.Code != "authorization_pending" {
			t.Fatalf("poll before approval: %v; want 409 authorization_pending", err)
		}
		if _, err := alice.ApproveDevice(ctx, "BBBB-BBBB"); api.AsError(err).Status != http.StatusNotFound {
			t.Fatalf("approve a wrong code: %v; want 404", err)
		}
		ok, err := alice.ApproveDevice(ctx, strings.ToLower(strings.ReplaceAll(d.UserCode, "-", " ")))
		if err != nil || ok.User != "alice" {
			t.Fatalf("approve: %+v %v", ok, err)
		}
		a, err := anon.DeviceToken(ctx, api.DeviceTokenRequest{DeviceCode: d.DeviceCode, LoginRequest: api.LoginRequest{Client: "laptop"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anon.DeviceToken(ctx, api.DeviceTokenRequest{DeviceCode: d.DeviceCode}); api.AsError(err).Status != http.StatusGone {
			t.Fatalf("second poll after the token was given: %v; want 410", err)
		}
		return a
	}
	first := signIn()
	if first.User != "alice" || first.Role != api.RoleUser || first.Login != "device:laptop" || first.ExpiresAt == nil {
		t.Fatalf("device token: %+v", first.Token)
	}
	me, err := client.New(e.url, client.WithToken(first.Secret)).Whoami(ctx)
	if err != nil || me.User != "alice" {
		t.Fatalf("whoami with the device token: %+v %v", me, err)
	}
	second := signIn()
	if _, err := client.New(e.url, client.WithToken(first.Secret)).Whoami(ctx); api.AsError(err).Status != http.StatusUnauthorized {
		t.Errorf("the first device token after signing in again from the same client: %v; want 401", err)
	}
	if _, err := client.New(e.url, client.WithToken(second.Secret)).Whoami(ctx); err != nil {
		t.Errorf("the second device token: %v", err)
	}
}

// TestInvites: an admin's invite signs its user in once, with its role
// and projects; a wrong, used or expired code is refused; users cannot
// make invites.
func TestInvites(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	admin := client.New(e.url, client.WithToken(e.tokens["admin"]))
	anon := client.New(e.url)
	inv, err := admin.CreateInvite(ctx, api.InviteRequest{User: "ana", Projects: []string{"vision"}, ExpiresIn: api.RawValue(`"48h"`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inv.Code, "corral-invite-") || inv.Role != api.RoleUser || time.Until(inv.ExpiresAt) < 47*time.Hour {
		t.Fatalf("invite: %+v", inv)
	}
	cases := []struct {
		name, code string
		status     int
		errCode    string
	}{
		{"wrong code", "corral-invite-nope", 401, "bad_invite"},
		{"no code", "", 422, ""},
		{"the code", inv.Code, 201, ""},
		{"the code again", inv.Code, 401, "bad_invite"},
	}
	for _, c := range cases {
		a, err := anon.RedeemInvite(ctx, api.InviteRedeemRequest{Code: c.code, LoginRequest: api.LoginRequest{Client: "laptop"}})
		if c.status == 201 {
			if err != nil || a.User != "ana" || len(a.Projects) != 1 || a.Projects[0] != "vision" || a.Secret == "" {
				t.Errorf("%s: %+v %v", c.name, a, err)
			}
			continue
		}
		ae := api.AsError(err)
		if ae.Status != c.status || (c.errCode != "" && ae.Code != c.errCode) {
			t.Errorf("%s: %v; want %d %s", c.name, err, c.status, c.errCode)
		}
	}
	user := client.New(e.url, client.WithToken(e.tokens["owner"]))
	if _, err := user.CreateInvite(ctx, api.InviteRequest{User: "mallory", Role: api.RoleAdmin}); api.AsError(err).Status != http.StatusForbidden {
		t.Errorf("a user's invite: %v; want 403", err)
	}
	if _, err := admin.CreateInvite(ctx, api.InviteRequest{User: "bad name!"}); api.AsError(err).Status != 422 || api.AsError(err).Field != "user" {
		t.Errorf("an invite for a bad name: %v; want 422 naming user", err)
	}
}

// TestInviteExpires: an invite past its expiry is refused (the service's
// clock moved on), and stays used.
func TestInviteExpires(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := auth.New(context.Background(), st, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	inv, err := a.CreateInvite(context.Background(), api.InviteRequest{User: "ana", ExpiresIn: api.RawValue(`3600`)}, auth.Principal{User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if _, _, err := a.RedeemInvite(context.Background(), inv.Code, "x", 0); api.AsError(err).Code != "invite_expired" {
		t.Fatalf("an expired invite: %v; want invite_expired", err)
	}
	now = now.Add(-time.Minute)
	if _, _, err := a.RedeemInvite(context.Background(), inv.Code, "x", 0); api.AsError(err).Code != "bad_invite" {
		t.Fatalf("an expired invite, again: %v; want bad_invite (used up)", err)
	}
}

// startLoginSocket serves the login socket of a server with auth in a
// directory every local user may reach.
func startLoginSocket(t *testing.T, e *authEnv, s *Server, policy auth.LocalPolicy) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-login-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "login.sock")
	ls, err := s.LoginSocket(policy, "http://head:7450")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := auth.ListenLoginSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("login socket mode: %v %v; want 0666", fi.Mode(), err)
	}
	return path
}

// loginServer is a server over the role matrix's backend whose auth
// service signs people in, with its login socket.
func loginServer(t *testing.T, policy auth.LocalPolicy) (*authEnv, string) {
	t.Helper()
	e := newAuthEnv(t)
	s := New(nil, slog.New(slog.DiscardHandler), WithAuth(e.a), WithLogin(LoginConfig{Host: "node1"}))
	return e, startLoginSocket(t, e, s, policy)
}

// TestLoginSocketOwnUID: the test process signs in through a real Unix
// socket as its own account (SO_PEERCRED); signing in again revokes the
// previous token; the audit trail records both. Root is refused unless
// the policy allows it.
func TestLoginSocketOwnUID(t *testing.T) {
	me, err := osuser.Current()
	if err != nil {
		t.Skip(err)
	}
	e, path := loginServer(t, auth.LocalPolicy{AllowRoot: true})
	ctx := context.Background()
	first, err := client.SocketLogin(ctx, path, api.LoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first.User != me.Username || first.Role != api.RoleUser || first.Login != "socket:node1" || first.Server != "http://head:7450" {
		t.Fatalf("socket login: %+v", first)
	}
	second, err := client.SocketLogin(ctx, path, api.LoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Authenticate(first.Secret); err == nil {
		t.Error("the first socket token still works after signing in again")
	}
	if p, err := e.a.Authenticate(second.Secret); err != nil || p.User != me.Username {
		t.Errorf("the second socket token: %+v %v", p, err)
	}
	entries, err := e.a.Audit(ctx, store.AuditFilter{Action: "login.socket"})
	if err != nil || len(entries) != 2 || entries[0].User != me.Username || !strings.HasPrefix(entries[0].Remote, "unix:uid="+me.Uid) ||
		!strings.Contains(entries[0].Target, first.ID) {
		t.Errorf("audit of socket logins: %+v %v", entries, err)
	}
	if me.Uid == "0" {
		_, path := loginServer(t, auth.LocalPolicy{})
		_, err := client.SocketLogin(ctx, path, api.LoginRequest{})
		if ae := api.AsError(err); ae.Status != http.StatusForbidden || ae.Code != "login_refused" {
			t.Errorf("root through a socket that does not allow root: %v; want 403 login_refused", err)
		}
	}
}

// TestLoginSocketOtherUID: as root, a child process run as another
// account (nobody) signs in through the socket: the token is that
// account's, not root's; a group the account is not in refuses it.
func TestLoginSocketOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root starts a process as another uid")
	}
	nobody, err := osuser.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl to connect as another uid")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	asNobody := func(path string) (int, []byte) {
		t.Helper()
		cmd := exec.Command(curl, "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", path, "-X", "POST", "-d", "{}", "http://login/login")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = "/"
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl as nobody: %v %s", err, out)
		}
		i := strings.LastIndexByte(string(out), '\n')
		code, _ := strconv.Atoi(strings.TrimSpace(string(out[i+1:])))
		return code, out[:i]
	}
	cases := []struct {
		name   string
		policy auth.LocalPolicy
		status int
	}{
		{"any account", auth.LocalPolicy{}, 201},
		{"in the group", auth.LocalPolicy{Group: groupName(t, nobody.Gid)}, 201},
		{"not in the group", auth.LocalPolicy{Group: "root"}, 403},
	}
	for _, c := range cases {
		e, path := loginServer(t, c.policy)
		status, body := asNobody(path)
		if status != c.status {
			t.Errorf("%s: %d %s; want %d", c.name, status, body, c.status)
			continue
		}
		if status != 201 {
			continue
		}
		var a api.LoginAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		p, err := e.a.Authenticate(a.Secret)
		if err != nil || p.User != "nobody" || p.Role != api.RoleUser {
			t.Errorf("%s: the token of nobody's login is %+v %v; want nobody's", c.name, p, err)
		}
	}
}

func groupName(t *testing.T, gid string) string {
	g, err := osuser.LookupGroupId(gid)
	if err != nil {
		t.Skip(err)
	}
	return g.Name
}

// TestNodeLogin: an agent signs in a user of its own node only with the
// join token, its node's session and --login-from-agents; never root.
func TestNodeLogin(t *testing.T) {
	for _, on := range []bool{false, true} {
		e := newAuthEnv(t, WithLogin(LoginConfig{FromAgents: on}))
		reg := func() string {
			resp, b := e.do("anon", "POST", "/agent/v1/register", `{"node_id":"n2","hostname":"n2","gpus":[],"tasks":[]}`, map[string]string{"Authorization": "Bearer " + testJoinToken})
			var cfg api.AgentConfig
			if err := json.Unmarshal(b, &cfg); err != nil || resp.StatusCode != 200 {
				t.Fatalf("register: %d %s", resp.StatusCode, b)
			}
			return cfg.Session
		}
		session := reg()
		call := func(body, session string) int {
			resp, _ := e.do("anon", "POST", "/auth/login/node", body, map[string]string{"Authorization": "Bearer " + testJoinToken, api.AgentSessionHeader: session})
			return resp.StatusCode
		}
		want := map[bool]int{false: 403, true: 201}[on]
		if got := call(`{"node_id":"n2","user":"ana","uid":1000}`, session); got != want {
			t.Errorf("from agents %v: ana's login: %d; want %d", on, got, want)
		}
		if got := call(`{"node_id":"n2","user":"root","uid":0}`, session); got != 403 {
			t.Errorf("from agents %v: root's login: %d; want 403", on, got)
		}
		if got := call(`{"node_id":"n2","user":"ana","uid":1000}`, "wrong"); got != 403 {
			t.Errorf("from agents %v: another node's session: %d; want 403", on, got)
		}
	}
}

// TestLogout: POST /auth/logout revokes the token presented; the
// bootstrap admin token is not revoked this way.
func TestLogout(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	nt, _, err := e.a.Login(ctx, auth.Grant{User: "ana", Login: "device:x"})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(e.url, client.WithToken(nt.Secret))
	if _, err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Whoami(ctx); api.AsError(err).Status != 401 {
		t.Errorf("whoami after logout: %v; want 401", err)
	}
	if _, err := client.New(e.url, client.WithToken(e.tokens["admin"])).Logout(ctx); api.AsError(err).Code != "bootstrap_token" {
		t.Errorf("logout of the bootstrap token: %v; want 409 bootstrap_token", err)
	}
}

// TestDevicePage: GET /login/device serves the approval page under the
// dashboard's content policy, and a dashboard session approves a code
// only with the dashboard's CSRF header.
func TestDevicePage(t *testing.T) {
	e := newAuthEnv(t)
	resp, b := e.do("anon", "GET", "/login/device", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "/ui/device.js") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET /login/device: %d %v %.200s", resp.StatusCode, resp.Header, b)
	}
	resp, _ = e.do("anon", "GET", "/ui/device.js", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /ui/device.js: %d", resp.StatusCode)
	}
	cookie := map[string]string{"Cookie": sessionCookie + "=" + e.tokens["owner"]}
	for _, c := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"without the CSRF header", cookie, 403},
		{"with it", map[string]string{"Cookie": cookie["Cookie"], csrfHeader: "1"}, 200},
	} {
		body := e.loginPlaceholders(`{"user_code":"{user_code}"}`)
		if resp, b := e.do("anon", "POST", "/auth/device/approve", body, c.headers); resp.StatusCode != c.status {
			t.Errorf("session approval %s: %d %s; want %d", c.name, resp.StatusCode, b, c.status)
		}
	}
}
