package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/shellproto"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/tunnel"
)

// ranksOnN1 is an agent pool whose every job's rank 0 runs on node n1.
type ranksOnN1 struct{ fakeAgents }

func (ranksOnN1) RankNode(_ string, rank int) (string, int, bool) { return "n1", 0, rank == 0 }

// fakeNode answers a shell with "hi from JOB" and exit 4, and dials ports
// on loopback.
type fakeNode struct{}

func (fakeNode) ServeShell(_ context.Context, req shellproto.Request, conn io.ReadWriteCloser) error {
	defer conn.Close()
	w := shellproto.NewWriter(conn)
	w.Write(shellproto.Data, []byte("hi from "+req.JobID))
	return w.WriteExit(4)
}

func (fakeNode) DialPort(ctx context.Context, req shellproto.Request) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)))
}

// shellEnv is a server whose jobs start at once on node n1, reached in
// process through a hub.
type shellEnv struct {
	t      *testing.T
	url    string
	srv    *Server
	a      *auth.Service
	tokens map[string]string
	submit func(user string, gpus int) string
}

func newShellEnv(t *testing.T) *shellEnv {
	t.Helper()
	hub := tunnel.NewHub()
	hub.SetLocal("n1", fakeNode{})
	re := &runExec{}
	h, o, a := newHandler(t, re, slog.New(slog.DiscardHandler), WithAgents(ranksOnN1{}, testJoinToken), WithTunnel(hub))
	re.o = o
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	e := &shellEnv{t: t, url: ts.URL, srv: h, a: a, tokens: map[string]string{"admin": testAdminToken}}
	for user, req := range map[string]api.TokenRequest{
		"alice": {User: "alice", Role: api.RoleUser},
		"bob":   {User: "bob", Role: api.RoleUser},
		"carol": {User: "carol", Role: api.RoleUser, ProjectAdmin: []string{"nlp"}},
	} {
		nt, err := a.Create(context.Background(), req, auth.Principal{User: "root", Role: api.RoleAdmin})
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[user] = nt.Secret
	}
	e.submit = func(user string, gpus int) string {
		j, _, err := o.Submit(context.Background(), api.SubmitRequest{User: user, Project: "nlp", Command: "x", GPUCount: intp(gpus)}, "")
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	return e
}

// waitRunning polls until the job runs.
func (e *shellEnv) waitRunning(id string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := e.srv.o.Job(id)
		if err == nil && j.State == api.StateRunning {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s did not start: %v %v", id, j.State, err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// shell dials the shell route as user and returns the session's output
// and exit code, or the refusal's status.
func (e *shellEnv) shell(user, id string) (out string, code, status int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, e.url+"/jobs/"+id+"/shell?cmd=true", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.tokens[user]}}})
	if err != nil {
		if resp == nil {
			e.t.Fatal(err)
		}
		return "", 0, resp.StatusCode
	}
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	defer nc.Close()
	for {
		f, err := shellproto.Read(nc)
		if err != nil {
			e.t.Fatalf("%s's session: %v", user, err)
		}
		switch f.Type {
		case shellproto.Data:
			out += string(f.Payload)
		case shellproto.Exit:
			return out, f.Code(), http.StatusSwitchingProtocols
		}
	}
}

// TestShellAccess: the job's owner, its project's admin and admins may
// attach, others may not; each attach and refusal is audited (job.shell);
// a queued job has no shell.
func TestShellAccess(t *testing.T) {
	e := newShellEnv(t)
	id := e.submit("alice", 1)
	e.waitRunning(id)
	for _, tc := range []struct {
		user   string
		status int
	}{{"alice", 101}, {"carol", 101}, {"admin", 101}, {"bob", 403}} {
		out, code, status := e.shell(tc.user, id)
		if status != tc.status || (status == 101 && (out != "hi from "+id || code != 4)) {
			t.Errorf("%s: status %d (want %d), output %q, exit %d", tc.user, status, tc.status, out, code)
		}
	}
	queued := e.submit("alice", 8)
	if _, _, status := e.shell("alice", queued); status != http.StatusConflict {
		t.Errorf("a queued job's shell: status %d, want 409", status)
	}
	entries, err := e.a.Audit(context.Background(), store.AuditFilter{Action: "job.shell"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, en := range entries {
		if en.Target == id {
			got[en.User] = en.Status
		}
	}
	want := map[string]int{"alice": 101, "carol": 101, "root": 101, "bob": 403} // the admin token is root's
	for u, s := range want {
		if got[u] != s {
			t.Errorf("audit of %s's attach: status %d, want %d (all: %v)", u, got[u], s, got)
		}
	}
}

// TestDialJobPort: the NodeDialer reaches a loopback TCP server on the
// job's node; a queued job, a bad port and an unknown job are refused.
func TestDialJobPort(t *testing.T) {
	e := newShellEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	id := e.submit("alice", 1)
	e.waitRunning(id)
	var d NodeDialer = e.srv
	c, err := d.DialJobPort(context.Background(), id, port)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	c.Close()
	for name, tc := range map[string]struct {
		id     string
		port   int
		status int
	}{
		"queued job":  {e.submit("alice", 8), port, http.StatusConflict},
		"port 0":      {id, 0, http.StatusUnprocessableEntity},
		"port 70000":  {id, 70000, http.StatusUnprocessableEntity},
		"unknown job": {"j-nope", port, http.StatusNotFound},
	} {
		_, err := d.DialJobPort(context.Background(), tc.id, tc.port)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != tc.status {
			t.Errorf("%s: %v, want HTTP %d", name, err, tc.status)
		}
	}
}

// TestShellBadQuery: a shell's bad parameters are 422 naming the field,
// before any upgrade.
func TestShellBadQuery(t *testing.T) {
	e := newShellEnv(t)
	id := e.submit("alice", 1)
	for query, field := range map[string]string{
		"rank=-1":                            "rank",
		"rank=x":                             "rank",
		"tty=maybe":                          "tty",
		"rows=70000":                         "rows",
		"cols=-2":                            "cols",
		"cmd=":                               "cmd",
		"term=a%3Db":                         "term",
		"cmd=" + strings.Repeat("x", 17<<10): "cmd",
	} {
		req, _ := http.NewRequest("GET", e.url+"/jobs/"+id+"/shell?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || eb.Error.Field != field {
			t.Errorf("%.40s: %d field %q, want 422 field %q", query, resp.StatusCode, eb.Error.Field, field)
		}
	}
}
