package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/store"
)

// These tests speak raw HTTP/1.1 over TCP, as a stalled or hostile client
// does, to a server whose connection limits (ConnLimits) are short.

// waitBound bounds how long a test waits for an answer the server should
// give at once (or after a timeout of well under a second).
const waitBound = 5 * time.Second

// slowAgents is an agent pool whose long poll holds each sync for hold,
// as a real one does while it has no work.
type slowAgents struct{ hold time.Duration }

func (slowAgents) Register(_ context.Context, reg api.AgentRegistration, _ string) (api.AgentConfig, error) {
	return api.AgentConfig{NodeID: reg.NodeID, HeartbeatInterval: 5, NodeTTL: 30}, nil
}

func (a slowAgents) Sync(ctx context.Context, _ api.AgentReport) (api.AgentWork, error) {
	t := time.NewTimer(a.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return api.AgentWork{}, nil
}

// connServer serves the API behind an http.Server configured by
// Conns with limits l.
func connServer(t *testing.T, l ConnLimits, opts ...Option) (*httptest.Server, *Conns) {
	t.Helper()
	cs := NewConns(l, slog.New(slog.DiscardHandler))
	h, _, _ := newHandler(t, idleExec{}, slog.New(slog.DiscardHandler), append([]Option{WithConns(cs)}, opts...)...)
	ts := httptest.NewUnstartedServer(h)
	cs.Configure(ts.Config)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, cs
}

// dial opens a raw connection to ts.
func dial(t *testing.T, ts *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAnswer reads one HTTP answer from c, within waitBound.
func readAnswer(t *testing.T, c net.Conn, br *bufio.Reader) (*http.Response, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitBound))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, nil
}

// closedWithin reports whether the server closes c (EOF or a reset)
// within d, reading and dropping whatever comes first.
func closedWithin(c net.Conn, br *bufio.Reader, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// A request that presents no valid token is answered 401 at once, without
// the server waiting for a body it announced but does not send, and its
// connection is closed soon after, not when a timeout ends it.
func TestRefusedBeforeTheBody(t *testing.T) {
	ts, _ := connServer(t, ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: time.Minute},
		WithAgents(fakeAgents{}, testJoinToken))
	cases := map[string]struct {
		path, auth string
	}{
		"submit, no token":      {"/queue/submit", ""},
		"submit, a bad token":   {"/queue/submit", "Bearer not-a-token"},
		"submit, not a bearer":  {"/queue/submit", "Basic eDp5"},
		"agent, no join token":  {"/agent/v1/sync", ""},
		"agent, a user's token": {"/agent/v1/register", "Bearer " + testAdminToken},
		"notebook, no token":    {"/proxy/j-1/api/contents", ""},
		"a path that is none":   {"/no/such/route", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, ts)
			head := "POST " + tc.path + " HTTP/1.1\r\nHost: corral\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
			if tc.auth != "" {
				head += "Authorization: " + tc.auth + "\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			start := time.Now()
			resp, err := readAnswer(t, c, br)
			if err != nil {
				t.Fatalf("no answer within %s while the body is not sent: %v", waitBound, err)
			}
			if resp.StatusCode != 401 && resp.StatusCode != 404 {
				t.Errorf("status %d, want 401 (404 for no route)", resp.StatusCode)
			}
			if !resp.Close {
				t.Errorf("the refusal keeps the connection (no Connection: close)")
			}
			if !closedWithin(c, br, waitBound) {
				t.Errorf("the connection is still open %s after the refusal", time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// With a valid token the body is read, and a body that stalls is cut by
// the read timeout: the connection does not stay open for ever.
func TestSlowBodyCutByReadTimeout(t *testing.T) {
	ts, _ := connServer(t, ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: 300 * time.Millisecond, WriteTimeout: time.Minute, IdleTimeout: time.Minute})
	c := dial(t, ts)
	io.WriteString(c, "POST /queue/submit HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer "+testAdminToken+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	br := bufio.NewReader(c)
	if resp, err := readAnswer(t, c, br); err == nil && resp.StatusCode < 400 {
		t.Fatalf("a body of 1 byte of 100000 was taken: %d", resp.StatusCode)
	}
	if !closedWithin(c, br, waitBound) {
		t.Fatalf("the connection of a stalled body is open %s after its read timeout", waitBound)
	}
}

// A keep-alive connection idle past the idle timeout is closed.
func TestIdleKeepAliveClosed(t *testing.T) {
	ts, _ := connServer(t, ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 300 * time.Millisecond})
	c := dial(t, ts)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: corral\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := readAnswer(t, c, br)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET /healthz: %v %+v; want 200 on a kept connection", err, resp)
	}
	if !closedWithin(c, br, waitBound) {
		t.Fatalf("an idle keep-alive connection is open %s after its idle timeout", waitBound)
	}
}

// Connections that present no token (idle, or stalled before their
// headers end) are capped: past the cap the oldest are closed, a new
// client is served, and connections whose callers authenticated are kept.
func TestStrangersCapped(t *testing.T) {
	const max, idle = 4, 20
	ts, cs := connServer(t, ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: time.Minute, MaxUnauthenticated: max})

	// An authenticated keep-alive connection, opened first.
	kept := dial(t, ts)
	keptR := bufio.NewReader(kept)
	whoami := "GET /auth/whoami HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer " + testAdminToken + "\r\n\r\n"
	io.WriteString(kept, whoami)
	if resp, err := readAnswer(t, kept, keptR); err != nil || resp.StatusCode != 200 {
		t.Fatalf("whoami: %v %+v", err, resp)
	}

	var strangers []net.Conn
	for i := range idle {
		c := dial(t, ts)
		if i%2 == 1 {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: cor") // headers that never end
		}
		strangers = append(strangers, c)
	}

	// A new client is served.
	req, _ := http.NewRequest("GET", ts.URL+"/auth/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	client := &http.Client{Timeout: waitBound, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a new client behind %d idle connections: %v", idle, err)
	}
	var who api.Whoami
	json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if resp.StatusCode != 200 || who.User != "root" {
		t.Fatalf("a new client behind %d idle connections: %d %+v", idle, resp.StatusCode, who)
	}

	// The oldest strangers were closed; at most max remain.
	for i, c := range strangers[:idle-max] {
		if !closedWithin(c, bufio.NewReader(c), waitBound) {
			t.Fatalf("stranger %d of %d is still open past the cap of %d", i, idle, max)
		}
	}
	if n := cs.Strangers(); n > max {
		t.Errorf("%d connections without a token are tracked, want at most %d", n, max)
	}

	// The authenticated connection was kept.
	io.WriteString(kept, whoami)
	if resp, err := readAnswer(t, kept, keptR); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the authenticated connection after the strangers: %v %+v", err, resp)
	}
}

// An authenticated stream (here an agent's long poll) outlives the write
// timeout: for a caller with a valid token it bounds each write's stall.
// A request without a token gets no such grace.
func TestAuthenticatedStreamOutlivesWriteTimeout(t *testing.T) {
	const write = 300 * time.Millisecond
	ts, _ := connServer(t, ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: write, IdleTimeout: time.Minute},
		WithAgents(slowAgents{hold: 3 * write}, testJoinToken))
	status, e, b := agentCall(t, ts, "/agent/v1/register", "", holderReg)
	var cfg api.AgentConfig
	if status != 200 || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("registration: %d %+v %s", status, e, b)
	}
	start := time.Now()
	status, e, _ = agentCall(t, ts, "/agent/v1/sync", cfg.Session, `{"node_id":"n2","tasks":[],"wait":5}`)
	if status != 200 {
		t.Fatalf("a long poll of %s under a write timeout of %s: %d %+v", time.Since(start).Round(time.Millisecond), write, status, e)
	}
}

// The flags' defaults bound everything.
func TestDefaultConnLimits(t *testing.T) {
	d := DefaultConnLimits()
	if d.ReadHeaderTimeout <= 0 || d.ReadTimeout <= 0 || d.WriteTimeout <= 0 || d.IdleTimeout <= 0 || d.MaxUnauthenticated <= 0 {
		t.Fatalf("a default leaves something unbounded: %+v", d)
	}
}

// The dashboard's event stream, silent past the write timeout, still
// carries the next change: its writes are bounded one by one.
func TestEventsOutliveWriteTimeout(t *testing.T) {
	const write = 300 * time.Millisecond
	ts, _ := connServer(t, ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: write, IdleTimeout: time.Minute})
	req, _ := http.NewRequest("GET", ts.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: ") {
				events <- sc.Text()
			}
		}
	}()
	next := func(what string) {
		t.Helper()
		select {
		case _, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
		case <-time.After(waitBound):
			t.Fatalf("%s: no event within %s", what, waitBound)
		}
	}
	next("the first event")
	time.Sleep(3 * write) // the stream stays silent past the write timeout
	sreq, _ := http.NewRequest("POST", ts.URL+"/queue/submit", strings.NewReader(`{"command":"true","gpu_count":1}`))
	sreq.Header.Set("Authorization", "Bearer "+testAdminToken)
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil || sresp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %v %v", err, sresp)
	}
	sresp.Body.Close()
	next("the event of a change after a silence of 3 write timeouts")
}

// A follower sends a change to the leader (307, or 503 with no leader)
// without waiting for the body it will never read.
func TestFollowerAnswersBeforeTheBody(t *testing.T) {
	st := &fakeLeaderStore{leader: store.LeaderInfo{Holder: "a", Address: "http://a:7450", Epoch: 3, Expires: time.Now().Add(time.Hour)}}
	f := NewFollower(FollowerConfig{Store: st, Self: "http://b:7450"})
	ts := httptest.NewUnstartedServer(f)
	NewConns(ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: time.Minute}, nil).Configure(ts.Config)
	ts.Start()
	t.Cleanup(ts.Close)
	c := dial(t, ts)
	io.WriteString(c, "POST /queue/submit HTTP/1.1\r\nHost: corral\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	br := bufio.NewReader(c)
	resp, err := readAnswer(t, c, br)
	if err != nil {
		t.Fatalf("no answer within %s while the body is not sent: %v", waitBound, err)
	}
	if resp.StatusCode != http.StatusTemporaryRedirect || !resp.Close {
		t.Fatalf("status %d, close %v; want 307 closing the connection", resp.StatusCode, resp.Close)
	}
	if !closedWithin(c, br, waitBound) {
		t.Fatalf("the connection is still open after the redirect")
	}
}

// The notebook proxy, for the job's owner: an upload longer than the read
// timeout whose stalls are each shorter goes through whole, and a
// notebook that answers long after the upload ended is still heard (no
// read deadline is left on the connection once the body has ended).
func TestProxyUploadBoundedByStalls(t *testing.T) {
	const read = 300 * time.Millisecond
	nb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		time.Sleep(3 * read) // a notebook slow to answer
		fmt.Fprintf(w, "got %d bytes", n)
	}))
	t.Cleanup(nb.Close)
	cs := NewConns(ConnLimits{ReadHeaderTimeout: time.Minute, ReadTimeout: read, WriteTimeout: time.Minute, IdleTimeout: time.Minute}, nil)
	re := &runExec{}
	h, o, a := newHandler(t, re, slog.New(slog.DiscardHandler), WithConns(cs), WithNodeDialer(&fakeDialer{addr: nb.Listener.Addr().String()}))
	re.o = o
	ts := httptest.NewUnstartedServer(h)
	cs.Configure(ts.Config)
	ts.Start()
	t.Cleanup(ts.Close)
	nt, err := a.Create(context.Background(), api.TokenRequest{User: "alice", Role: api.RoleUser}, auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	job, _, err := o.Submit(context.Background(), api.SubmitRequest{User: "alice", Command: "x", GPUCount: intp(1), Notebook: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.After(waitBound); ; {
		changed := o.Changed()
		if j, err := o.Job(job.ID); err == nil && j.State == api.StateRunning {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the notebook job did not start")
		}
	}

	pr, pw := io.Pipe()
	go func() {
		chunk := strings.Repeat("x", 1000)
		for range 10 {
			time.Sleep(read / 3) // a slow uploader: 10 short stalls, 3 read timeouts in all
			if _, err := io.WriteString(pw, chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", ts.URL+api.NotebookPath(job.ID)+"api/contents/data.csv", pr)
	req.Header.Set("Authorization", "Bearer "+nt.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("an upload of 3 read timeouts with short stalls: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "got 10000 bytes" {
		t.Fatalf("an upload of 3 read timeouts with short stalls: %d %s", resp.StatusCode, b)
	}
}
