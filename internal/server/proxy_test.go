package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/attach"
	"github.com/corral-sched/corral/internal/auth"
)

// fakeDialer stands for the server-agent tunnel: it records what it was
// asked and connects to a local test server instead.
type fakeDialer struct {
	addr string
	mu   sync.Mutex
	got  []string // "job:port"
}

func (d *fakeDialer) DialJobPort(ctx context.Context, jobID string, port int) (net.Conn, error) {
	d.mu.Lock()
	d.got = append(d.got, fmt.Sprintf("%s:%d", jobID, port))
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", d.addr)
}

func (d *fakeDialer) asked() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string{}, d.got...)
}

// notebookStub serves a page naming the path and echoes WebSockets at
// any path ending in /ws.
func notebookStub(t testing.TB) *httptest.Server {
	t.Helper()
	nb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ws") {
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(r.Context())
				if err != nil || c.Write(r.Context(), typ, msg) != nil {
					return
				}
			}
		}
		fmt.Fprintf(w, "stub path=%s auth=%s", r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(nb.Close)
	return nb
}

// notebookServer runs a server whose jobs start at once on node n1 (a
// remote node: the server has no local node), with the given options, and
// a running notebook job of alice's; it returns the server's URL and
// alice's token too.
func notebookServer(t testing.TB, opts ...Option) (url string, job api.Job, alice string) {
	t.Helper()
	re := &runExec{}
	h, o, a := newHandler(t, re, slog.New(slog.DiscardHandler), opts...)
	re.o = o
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	nt, err := a.Create(context.Background(), api.TokenRequest{User: "alice", Role: api.RoleUser}, auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	job, _, err = o.Submit(context.Background(), api.SubmitRequest{User: "alice", Command: "x", GPUCount: intp(1), Notebook: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		changed := o.Changed()
		if j, err := o.Job(job.ID); err == nil && j.State == api.StateRunning {
			return srv.URL, j, nt.Secret
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the notebook job %s did not start", job.ID)
		}
	}
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

func proxyCall(t *testing.T, url string, h http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header = h
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestProxyThroughNodeDialer: a notebook on a remote node is reached
// through the NodeDialer, on the attempt's port; each request and each
// open WebSocket counts as attached to the job.
func TestProxyThroughNodeDialer(t *testing.T) {
	nb := notebookStub(t)
	d := &fakeDialer{addr: nb.Listener.Addr().String()}
	reg := attach.New(nil)
	url, job, alice := notebookServer(t, WithNodeDialer(d), WithAttach(reg), WithProxyPublicURL("https://corral.example/"))
	base := url + api.NotebookPath(job.ID)

	resp, body := proxyCall(t, base+"lab", bearer(alice))
	if got := resp.Header.Get(api.NotebookURLHeader); got != "https://corral.example/proxy/"+job.ID+"/" {
		t.Errorf("%s is %q, want the notebook under the public URL", api.NotebookURLHeader, got)
	}
	if resp.StatusCode != 200 || body != "stub path=/proxy/"+job.ID+"/lab auth=token "+api.NotebookSecret(job.Env[api.NotebookTokenVar], 0) {
		t.Fatalf("GET through the dialer: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get(api.NotebookProxiedHeader) == "" {
		t.Errorf("a proxied answer lacks %s", api.NotebookProxiedHeader)
	}
	want := fmt.Sprintf("%s:%d", job.ID, api.NotebookPort(job.ID, 0))
	if got := d.asked(); len(got) == 0 || got[0] != want {
		t.Errorf("the dialer was asked %v, want %s", got, want)
	}
	if n, last := reg.Attached(job.ID); n != 0 || last.IsZero() {
		t.Errorf("after a request: %d attached, last closed %v; want 0 and a time", n, last)
	}

	// A prefix of the id redirects to the notebook's own path.
	resp, _ = proxyCall(t, url+"/proxy/"+job.ID[:10]+"/tree?a=b", bearer(alice))
	if loc := resp.Header.Get("Location"); resp.StatusCode != 307 || loc != "/proxy/"+job.ID+"/tree?a=b" {
		t.Errorf("a prefix: %d Location %q", resp.StatusCode, loc)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"api/ws", &websocket.DialOptions{HTTPHeader: bearer(alice)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "ping" {
		t.Fatalf("echo: %q %v", msg, err)
	}
	if n, _ := reg.Attached(job.ID); n != 1 {
		t.Errorf("with a WebSocket open: %d attached, want 1", n)
	}
	c.Close(websocket.StatusNormalClosure, "")
	waitAttached(t, reg, job.ID, 0)
}

// waitAttached waits until the job has n connections attached.
func waitAttached(t *testing.T, reg *attach.Registry, jobID string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := reg.Attached(jobID)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s has %d connections attached, want %d", jobID, got, n)
		}
		time.Sleep(10 * time.Millisecond) // poll interval: the proxy's close has no event to await
	}
}

// TestProxyRefusals: who and what the proxy refuses, and how.
func TestProxyRefusals(t *testing.T) {
	url, job, alice := notebookServer(t) // no NodeDialer, no local node
	base := url + api.NotebookPath(job.ID)
	for name, c := range map[string]struct {
		url    string
		header http.Header
		status int
		code   string
		says   string
	}{
		"no tunnel":    {base, bearer(alice), 502, "notebook_unreachable", "no tunnel"},
		"an admin":     {base, bearer(testAdminToken), 403, "forbidden", "only the owner"},
		"no token":     {base, http.Header{}, 401, "unauthenticated", ""},
		"unknown job":  {url + "/proxy/j0000000000000000000000000/", bearer(alice), 404, "not_found", ""},
		"cross origin": {base, http.Header{"Cookie": {sessionCookie + "=" + alice}, "Origin": {"https://evil.example"}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, 403, "csrf", "another origin"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := proxyCall(t, c.url, c.header)
			var e api.ErrorBody
			if resp.StatusCode != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) {
				t.Errorf("%d %s, want %d %s saying %q", resp.StatusCode, body, c.status, c.code, c.says)
			}
		})
	}
}

func TestStripCookies(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"corral_session=abc", ""},
		{"corral_session=abc; _xsrf=1", "_xsrf=1"},
		{"a=1; corral_session=abc; b=2", "a=1; b=2"},
		{"corral_sessionx=1", "corral_sessionx=1"},
	} {
		h := http.Header{"Cookie": {c.in}}
		stripCookie(h, sessionCookie)
		if got := h.Get("Cookie"); got != c.want {
			t.Errorf("Cookie %q -> %q, want %q", c.in, got, c.want)
		}
	}
	h := http.Header{"Set-Cookie": {"corral_session=x; Path=/", "_xsrf=2; Path=/"}}
	dropSetCookie(h, sessionCookie)
	if got := h.Values("Set-Cookie"); len(got) != 1 || got[0] != "_xsrf=2; Path=/" {
		t.Errorf("Set-Cookie after dropSetCookie: %q", got)
	}
}
