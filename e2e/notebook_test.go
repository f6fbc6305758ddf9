package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
)

// buildNotebookStub builds the stand-in notebook server
// (testdata/notebookstub) and returns its path.
func buildNotebookStub(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "corral-e2e-nbstub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "notebookstub")
	build := exec.Command("go", "build", "-o", bin, "./e2e/testdata/notebookstub")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the notebook stub: %v\n%s", err, out)
	}
	return bin
}

// userToken creates a user token for name through the API.
func userToken(t *testing.T, s *server, name string) string {
	t.Helper()
	var nt api.NewToken
	s.mustJSON("POST", "/auth/tokens", map[string]any{"user": name, "role": "user"}, 201, &nt)
	return nt.Secret
}

// proxyGet sends GET url with the given headers (no admin token).
func proxyGet(t *testing.T, url string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestNotebookProxy: corral notebook with a stand-in server prints a URL
// through the Corral server; the owner's token reaches the notebook over
// HTTP and WebSocket, with the Corral credentials replaced by the
// notebook's own secret; nobody else passes, not even an admin.
func TestNotebookProxy(t *testing.T) {
	stub := buildNotebookStub(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "nb-node", "--run-as", "agent",
		"--public-url", "https://corral.example/")
	ana, bo := userToken(t, s, "ana"), userToken(t, s, "bo")

	stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + ana},
		"notebook", "--gpus", "1", "--cmd", stub)
	if code != 0 {
		t.Fatalf("corral notebook: exit %d\nstdout %s\nstderr %s\nserver:\n%s", code, stdout, stderr, s.out.String())
	}
	// The URL is under the server's --public-url; the test reaches the
	// same path on the server's own address.
	id, ok := strings.CutSuffix(strings.TrimPrefix(strings.TrimSpace(stdout), "https://corral.example/proxy/"), "/")
	if !ok || id == "" || strings.Contains(id, "/") {
		t.Fatalf("corral notebook printed %q, want https://corral.example/proxy/JOB/", stdout)
	}
	url := s.URL + "/proxy/" + id + "/"
	job := s.job(id)
	// (corral notebook asks for class interactive: TestNotebookRequest;
	// the job's class keeps it.)
	if job.State != api.StateRunning || !job.Notebook || job.User != "ana" || len(job.Allocation) != 1 {
		t.Fatalf("the notebook's job: state %s notebook %v user %s allocation %v", job.State, job.Notebook, job.User, job.Allocation)
	}
	if len(job.Env[api.NotebookTokenVar]) < 32 {
		t.Fatalf("the job's %s is %q", api.NotebookTokenVar, job.Env[api.NotebookTokenVar])
	}
	secret := api.NotebookSecret(job.Env[api.NotebookTokenVar], 0) // the attempt's
	if secret == job.Env[api.NotebookTokenVar] {
		t.Fatal("the attempt's secret is the job's")
	}

	t.Run("owner's token", func(t *testing.T) {
		resp, body := proxyGet(t, url+"tree?x=1", map[string]string{"Authorization": "Bearer " + ana})
		if resp.StatusCode != 200 || !strings.Contains(body, "notebook stub of "+id) || !strings.Contains(body, "path=/proxy/"+id+"/tree\n") {
			t.Fatalf("GET through the proxy: %d %s", resp.StatusCode, body)
		}
		if strings.Contains(body, ana) || !strings.Contains(body, "authorization=token "+secret+"\n") {
			t.Errorf("the notebook saw the caller's token, or not its own secret:\n%s", body)
		}
		for _, c := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "corral_session=") {
				t.Errorf("the notebook replaced the Corral session: Set-Cookie %s", c)
			}
		}
		if !strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), "\n"), "_xsrf=stub") {
			t.Errorf("the notebook's own cookie did not come through: %v", resp.Header.Values("Set-Cookie"))
		}
	})
	t.Run("owner's session", func(t *testing.T) {
		resp, body := proxyGet(t, url, map[string]string{"Cookie": "corral_session=" + ana + "; _xsrf=abc"})
		if resp.StatusCode != 200 || !strings.Contains(body, "cookie=_xsrf=abc\n") {
			t.Fatalf("GET with the dashboard session: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("others", func(t *testing.T) {
		for _, c := range []struct {
			who     string
			headers map[string]string
			want    int
		}{
			{"another user", map[string]string{"Authorization": "Bearer " + bo}, 403},
			{"an admin", map[string]string{"Authorization": "Bearer " + adminToken}, 403},
			{"another user's session", map[string]string{"Cookie": "corral_session=" + bo}, 403},
			{"no token", nil, 401},
		} {
			resp, body := proxyGet(t, url, c.headers)
			if resp.StatusCode != c.want || strings.Contains(body, "notebook stub") {
				t.Errorf("%s: %d %s, want %d", c.who, resp.StatusCode, truncate(body, 200), c.want)
			}
		}
	})
	t.Run("websocket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		wsURL := "ws" + strings.TrimPrefix(url, "http") + "api/kernels/k1/ws"
		c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ana}}})
		if err != nil {
			t.Fatalf("WebSocket through the proxy: %v", err)
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 22)
		for _, msg := range []string{"hello", strings.Repeat("x", 100000)} {
			if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := c.Read(ctx)
			if err != nil || string(got) != msg {
				t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
			}
		}
		c.Close(websocket.StatusNormalClosure, "")
		// Another site's page cannot open it with the session cookie.
		_, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{
			"Cookie": {"corral_session=" + ana}, "Origin": {"https://evil.example"}}})
		if err == nil || resp == nil || resp.StatusCode != 403 {
			t.Errorf("cross-origin WebSocket with the session: %v %v", resp, err)
		}
		if _, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + bo}}}); err == nil {
			t.Errorf("another user opened the notebook's WebSocket")
		}
	})
	t.Run("not a notebook, not running", func(t *testing.T) {
		plain := s.submit(map[string]any{"command": "sleep 30", "gpu_count": 0, "user": "ana"})
		resp, body := proxyGet(t, s.URL+"/proxy/"+plain.ID+"/", map[string]string{"Authorization": "Bearer " + ana})
		if resp.StatusCode != 404 || !strings.Contains(body, "runs no notebook") {
			t.Errorf("a job without a notebook: %d %s", resp.StatusCode, body)
		}
		if _, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + ana}, "cancel", id); code != 0 {
			t.Fatalf("cancel: %s", stderr)
		}
		s.waitTerminal(id, 30*time.Second)
		resp, body = proxyGet(t, url, map[string]string{"Authorization": "Bearer " + ana})
		var e api.ErrorBody
		if resp.StatusCode != 409 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "not_running" {
			t.Errorf("an ended notebook: %d %s", resp.StatusCode, body)
		}
	})
	// The first access is in the audit trail, once per token and attempt.
	var audit api.AuditList
	s.mustJSON("GET", "/audit?user=ana&limit=100", nil, 200, &audit)
	opens := 0
	for _, e := range audit.Entries {
		if e.Action == "notebook.open" && e.Target == id {
			opens++
		}
	}
	if opens != 1 { // ana's one token, by header, cookie and WebSocket
		t.Errorf("%d notebook.open entries in the audit trail for job %s, want 1", opens, id)
	}
}

// TestNotebookInBrowser: in real Chromium, the owner signed in on the
// dashboard finds the link on the job's page, and the session cookie
// alone opens the notebook and its WebSocket (the browser sends this
// server's Origin); the notebook never sees the cookie.
func TestNotebookInBrowser(t *testing.T) {
	ctx := browser(t)
	stub := buildNotebookStub(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "nb-dash", "--run-as", "agent")
	ana := userToken(t, s, "ana")
	job := s.submit(map[string]any{"command": stub, "gpu_count": 1, "user": "ana", "notebook": true})
	s.waitState(job.ID, api.StateRunning, 30*time.Second)
	nbURL := s.URL + "/proxy/" + job.ID + "/"
	waitFor(t, 30*time.Second, func() string { return "the notebook did not answer through the proxy" }, func() bool {
		resp, _ := proxyGet(t, nbURL, map[string]string{"Authorization": "Bearer " + ana})
		return resp.Header.Get(api.NotebookProxiedHeader) != ""
	})

	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+ana+"#/jobs/"+job.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[data-role=notebook]`)),
	)
	if err != nil {
		t.Fatalf("the job's page: %v", err)
	}
	href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`a[data-role=notebook]`), "href"))
	if err != nil || href.Value != "/proxy/"+job.ID+"/" {
		t.Fatalf("the notebook link is %q (%v)", href.Value, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+href.Value)); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
	if err != nil || !strings.Contains(body, "notebook stub of "+job.ID) || strings.Contains(body, "corral_session") || strings.Contains(body, ana) {
		t.Fatalf("the notebook page in the browser: %q (%v)", body, err)
	}
	echo, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new Promise((ok, fail) => {
		const ws = new WebSocket(location.href.replace(/^http/, 'ws') + 'api/kernels/k/ws');
		ws.onopen = () => ws.send('from the browser');
		ws.onmessage = (e) => { ok(e.data); ws.close(); };
		ws.onerror = () => fail('WebSocket error');
	})`, chromedp.EvalAwaitPromise))
	if err != nil || echo != "from the browser" {
		t.Fatalf("a WebSocket from the notebook's page: %q (%v)", echo, err)
	}
}

// TestNotebookJupyter runs a real Jupyter server and classic Notebook
// (when the machine has them) behind the proxy with the flags corral notebook adds: its API
// answers under /proxy/JOB/ with the secret the proxy presents, and a
// kernel's WebSocket, opened with this server's Origin, runs code.
func TestNotebookJupyter(t *testing.T) {
	if _, err := exec.LookPath("jupyter"); err != nil {
		t.Skip("no jupyter on PATH; TestNotebookProxy covers the proxy with a stand-in")
	}
	for _, app := range []string{"server", "notebook"} {
		t.Run(app, func(t *testing.T) {
			if out, err := exec.Command("jupyter", app, "--version").CombinedOutput(); err != nil {
				t.Skipf("jupyter %s is not installed: %v %s", app, err, out)
			}
			jupyterBehindProxy(t, "jupyter "+app)
		})
	}
}

// jupyterBehindProxy starts cmd with corral notebook and runs code in a
// kernel of it through the proxy.
func jupyterBehindProxy(t *testing.T, cmd string) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "nb-jupyter", "--run-as", "agent")
	ana := userToken(t, s, "ana")
	home := t.TempDir()
	stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + ana},
		// --allow-root: the test's agent runs jobs as root (--run-as agent).
		"notebook", "--gpus", "1", "--cmd", cmd+" --allow-root", "--env", "HOME="+home, "--workdir", home)
	if code != 0 {
		var logs string
		for _, j := range s.jobs() {
			logs += s.logs(j.ID)
		}
		t.Fatalf("corral notebook --cmd %q: exit %d\n%s\n%s\njob log:\n%s", cmd, code, stdout, stderr, logs)
	}
	url := strings.TrimSpace(stdout)
	id := strings.TrimSuffix(strings.TrimPrefix(url, s.URL+"/proxy/"), "/")
	t.Cleanup(func() { runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + ana}, "cancel", id) })

	resp, body := proxyGet(t, url+"api/status", map[string]string{"Authorization": "Bearer " + ana})
	if resp.StatusCode != 200 || !strings.Contains(body, `"started"`) {
		t.Fatalf("Jupyter's /api/status through the proxy: %d %s\njob log:\n%s", resp.StatusCode, body, s.logs(id))
	}

	// A kernel, and code run over its WebSocket.
	req, _ := http.NewRequest("POST", url+"api/kernels", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+ana)
	kresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var kernel struct{ ID string }
	err = json.NewDecoder(kresp.Body).Decode(&kernel)
	kresp.Body.Close()
	if kresp.StatusCode != 201 || err != nil || kernel.ID == "" {
		t.Skipf("Jupyter could not start a kernel (%d, %v): the HTTP side passed; log:\n%s", kresp.StatusCode, err, s.logs(id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"api/kernels/"+kernel.ID+"/channels",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ana}, "Origin": {s.URL}}})
	if err != nil {
		t.Fatalf("the kernel's WebSocket: %v\nlog:\n%s", err, s.logs(id))
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 22)
	msg := `{"header":{"msg_id":"m1","username":"ana","session":"s1","msg_type":"execute_request","version":"5.3"},` +
		`"parent_header":{},"metadata":{},"channel":"shell","buffers":[],` +
		`"content":{"code":"print(6*7)","silent":false,"store_history":false,"user_expressions":{},"allow_stdin":false,"stop_on_error":true}}`
	if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the kernel's output: %v", err)
		}
		var m struct {
			Header struct {
				MsgType string `json:"msg_type"`
			} `json:"header"`
			Content struct{ Text string } `json:"content"`
		}
		if json.Unmarshal(data, &m) == nil && m.Header.MsgType == "stream" {
			if m.Content.Text != "42\n" {
				t.Fatalf("the kernel printed %q, want 42", m.Content.Text)
			}
			return
		}
	}
}

// TestNotebookInterrupted: Ctrl-C while corral notebook waits for GPUs
// cancels the job and exits 130, as salloc gives up a pending allocation.
func TestNotebookInterrupted(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "nb-int", "--run-as", "agent")
	ana := userToken(t, s, "ana")
	blocker := s.submit(map[string]any{"command": "sleep 60", "gpu_count": 2, "user": "bo"})
	s.waitState(blocker.ID, api.StateRunning, 30*time.Second)

	cmd := exec.Command(corralBin, "notebook", "--gpus", "1", "--cmd", "sleep 60")
	cmd.Env = cleanEnv("CORRAL_SERVER="+s.URL, "CORRAL_TOKEN="+ana, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "client.json"))
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitFor(t, 30*time.Second, func() string { return "corral notebook did not say it waits: " + stderr.String() },
		func() bool { return strings.Contains(stderr.String(), "(queued") })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("corral notebook did not exit after Ctrl-C: %s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "canceled") {
		t.Fatalf("after Ctrl-C: exit %d, stderr %s", code, stderr.String())
	}
	var id string
	for _, j := range s.jobs() {
		if j.Notebook {
			id = j.ID
		}
	}
	if id == "" {
		t.Fatal("no notebook job was submitted")
	}
	if j := s.waitTerminal(id, 30*time.Second); j.State != api.StateCanceled {
		t.Errorf("the interrupted notebook's job is %s, want canceled", j.State)
	}
}

// TestNotebookWaitsForItsPrefix: an app that listens but answers 404
// under /proxy/JOB/ is not ready: corral notebook says why it still waits
// and prints the URL only once the app answers there.
func TestNotebookWaitsForItsPrefix(t *testing.T) {
	stub := buildNotebookStub(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "1", "--node-name", "nb-node", "--run-as", "agent")
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(corralBin, "notebook", "--gpus", "1", "--cmd", "NOTEBOOKSTUB_READY_FILE="+ready+" "+stub)
	cmd.Env = cleanEnv("CORRAL_SERVER="+s.URL, "CORRAL_TOKEN="+adminToken, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "client.json"))
	var stdout lockedBuffer
	stderr := &lineWatch{want: "answers 404 under /proxy/", seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case <-stderr.seen:
	case err := <-done:
		t.Fatalf("corral notebook ended (%v) before saying the app answers 404: stdout %q stderr %s", err, stdout.String(), stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("corral notebook never said that the app answers 404 under its prefix: %s", stderr.String())
	}
	if stdout.String() != "" {
		t.Fatalf("corral notebook printed a URL while the app answered 404: %q", stdout.String())
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("corral notebook: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("corral notebook did not print the URL once the app answered")
	}
	if !strings.Contains(stdout.String(), "/proxy/") {
		t.Errorf("corral notebook printed %q, want its URL", stdout.String())
	}
}

// lineWatch collects a process's output and closes seen once a line
// holding want has been written.
type lineWatch struct {
	lockedBuffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	n, err := w.lockedBuffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}
