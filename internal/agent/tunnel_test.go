package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/shellproto"
	"github.com/corral-sched/corral/internal/tunnel"
)

// tunnelEnv is an agent running task j1 (attempt 0, rank 0, GPUs 1 and
// 3), a hub that reaches it in process as node "local", and the same
// agent reached as node "far" through the tunnel over a real HTTP server.
type tunnelEnv struct {
	a   *Agent
	hub *tunnel.Hub
}

func newTunnelEnv(t testing.TB) *tunnelEnv {
	t.Helper()
	a, err := New(Config{NodeID: "far", Link: fakeLink{}, StateDir: t.TempDir(), LogDir: t.TempDir(), RunAs: RunAsAgent, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	spec := api.TaskSpec{JobID: "j1", GPUs: []int{1, 3}, Env: map[string]string{"FROM_JOB": "yes"}}
	a.tasks.byKey[keyOf(spec)] = &task{spec: spec, startedAt: time.Now()}
	hub := tunnel.NewHub()
	hub.SetLocal("local", a)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != TunnelPath || r.Header.Get("Authorization") != "Bearer join" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		q := r.URL.Query()
		if s := q.Get("session"); s != "" {
			hub.ServeData(r.Context(), q.Get("node_id"), s, q.Get("failure"), c)
			return
		}
		hub.ServeControl(r.Context(), q.Get("node_id"), c)
	}))
	t.Cleanup(srv.Close)
	link, err := NewHTTPLink(srv.URL, "join", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	close(a.registered)
	go a.tunnelLoop(ctx, link)
	return &tunnelEnv{a: a, hub: hub}
}

// open opens req on node, retrying while the agent's control channel is
// not yet connected.
func (e *tunnelEnv) open(t testing.TB, node string, req shellproto.Request) (net.Conn, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := e.hub.Open(ctx, node, req)
		cancel()
		if !errors.Is(err, tunnel.ErrNoTunnel) || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(20 * time.Millisecond) // poll interval: the control channel connects
	}
}

// echoServer is a plain TCP echo server on loopback; it returns the port.
func echoServer(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestTunnelPort: a port stream reaches a loopback TCP server on the
// job's node, in process and through the tunnel; a job that does not run
// there, or a closed port, is refused.
func TestTunnelPort(t *testing.T) {
	e := newTunnelEnv(t)
	port := echoServer(t)
	for _, node := range []string{"local", "far"} {
		t.Run(node, func(t *testing.T) {
			c, err := e.open(t, node, shellproto.Request{Kind: shellproto.KindPort, JobID: "j1", Port: port})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			for _, line := range []string{"hello\n", strings.Repeat("x", 100000) + "\n"} {
				if _, err := io.WriteString(c, line); err != nil {
					t.Fatal(err)
				}
				got, err := r.ReadString('\n')
				if err != nil || got != line {
					t.Fatalf("echo of %d bytes: %d bytes back, %v", len(line), len(got), err)
				}
			}
			if _, err := e.open(t, node, shellproto.Request{Kind: shellproto.KindPort, JobID: "other", Port: port}); err == nil {
				t.Fatal("a port stream for a job that does not run on the node was opened")
			}
			closed := closedPort(t)
			if _, err := e.open(t, node, shellproto.Request{Kind: shellproto.KindPort, JobID: "j1", Port: closed}); err == nil {
				t.Fatal("a stream to a closed port was opened")
			}
		})
	}
}

func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestTunnelShell: a shell without a PTY runs in the job's environment,
// gets its stdin, keeps stderr apart and sends its exit code, in process
// and through the tunnel; a shell of a job that does not run there says
// so and exits 127.
func TestTunnelShell(t *testing.T) {
	e := newTunnelEnv(t)
	for _, node := range []string{"local", "far"} {
		t.Run(node, func(t *testing.T) {
			c, err := e.open(t, node, shellproto.Request{Kind: shellproto.KindShell, JobID: "j1",
				Command: []string{"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $CORRAL_JOB_ID $FROM_JOB"; read x; echo "got $x"; echo oops >&2; exit 3`}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			w := shellproto.NewWriter(c)
			w.Write(shellproto.Data, []byte("typed\n"))
			w.Write(shellproto.EOF, nil)
			stdout, stderr, code := readSession(t, c)
			if stdout != "1,3 j1 yes\ngot typed\n" || stderr != "oops\n" || code != 3 {
				t.Fatalf("stdout %q, stderr %q, exit %d", stdout, stderr, code)
			}
			c2, err := e.open(t, node, shellproto.Request{Kind: shellproto.KindShell, JobID: "gone", Command: []string{"true"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			_, errText, code := readSession(t, c2)
			if code != 127 || !strings.Contains(errText, "does not run on this node") {
				t.Fatalf("a shell of a job not here: exit %d, error %q", code, errText)
			}
		})
	}
}

// readSession reads a session's frames until Exit: its stdout, its
// stderr and error text, and its code.
func readSession(t *testing.T, c net.Conn) (stdout, stderr string, code int) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var o, e strings.Builder
	for {
		f, err := shellproto.Read(c)
		if err != nil {
			t.Fatalf("reading the session: %v (stdout %q, stderr %q)", err, o.String(), e.String())
		}
		switch f.Type {
		case shellproto.Data:
			o.Write(f.Payload)
		case shellproto.Stderr, shellproto.Error:
			e.Write(f.Payload)
		case shellproto.Exit:
			return o.String(), e.String(), f.Code()
		}
	}
}

// TestShellHangUp: a shell whose client goes is hung up; a shell is shown
// its task's notice; a shell whose task ends is told so and closed.
func TestShellHangUp(t *testing.T) {
	e := newTunnelEnv(t)
	pidOf := func(c net.Conn) int {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := shellproto.Read(c)
		if err != nil || f.Type != shellproto.Data {
			t.Fatalf("first frame: %v %v", f, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(f.Payload)))
		if err != nil {
			t.Fatalf("pid %q: %v", f.Payload, err)
		}
		return pid
	}
	gone := func(pid int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("shell process %d still runs", pid)
			}
			time.Sleep(20 * time.Millisecond) // poll interval
		}
	}
	req := shellproto.Request{Kind: shellproto.KindShell, JobID: "j1", Command: []string{"sh", "-c", "echo $$; exec sleep 600"}}

	c, err := e.open(t, "local", req)
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(c)
	c.Close()
	gone(pid)

	c, err = e.open(t, "far", req)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid = pidOf(c)
	// A notice (preemption soon) is shown in the shell, which goes on.
	e.a.tasks.stop(taskKey{"j1", 0, 0}, -1, "preempted for job j9; stopping in 30s")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if f, err := shellproto.Read(c); err != nil || f.Type != shellproto.Notice || !strings.Contains(string(f.Payload), "preempted for job j9") {
		t.Fatalf("after a notice: %v %q %v", f, f.Payload, err)
	}
	e.a.tasks.mu.Lock()
	tk := e.a.tasks.byKey[taskKey{"j1", 0, 0}]
	e.a.tasks.mu.Unlock()
	now := time.Now()
	e.a.tasks.finish(tk, api.TaskStatus{ExitCode: 0, FinishedAt: &now})
	_, errText, code := readSession(t, c)
	want := 128 + int(syscall.SIGHUP)
	if signal.Ignored(syscall.SIGHUP) {
		// Run under nohup: the shell inherits SIGHUP ignored, and the
		// agent's SIGKILL after shellKill closes it.
		want = 128 + int(syscall.SIGKILL)
	}
	if !strings.Contains(errText, "job j1 has ended") || code != want {
		t.Fatalf("after the task ended: error %q, exit %d; want exit %d", errText, code, want)
	}
	gone(pid)
}
