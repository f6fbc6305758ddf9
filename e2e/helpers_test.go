package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// corralBin is the corral binary TestMain builds.
var corralBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "corral-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin := os.Getenv("CORRAL_E2E_BIN"); bin != "" {
		// A corral built beforehand: for a machine without Go (a GPU
		// machine the tests are carried to, with this test binary).
		if corralBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: CORRAL_E2E_BIN:", err)
			return 1
		}
		return m.Run()
	}
	corralBin = filepath.Join(dir, "corral")
	args := []string{"build", "-o", corralBin}
	if os.Getenv("CORRAL_E2E_RACE") == "1" {
		// The server under the race detector: slower, and any race it
		// reports fails the test that ran it.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/corral")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building corral failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// moduleRoot finds the directory holding go.mod, from the test's working
// directory (the e2e package directory) upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// cleanEnv is the test's environment without CORRAL_* variables, so that
// the caller's settings (a token, a server URL) do not leak into the test.
// Agents run jobs as their own account (CORRAL_RUN_AS=agent): the tests
// run as root, and their jobs' users ("admin", "ana") have no Unix
// account; the run-as tests pass --run-as themselves.
func cleanEnv(extra ...string) []string {
	env := []string{"CORRAL_RUN_AS=agent"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORRAL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// lockedBuffer collects a process's output for the failure report.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is one running `corral up` process, seen from one test. on
// gives a view of the same process for a subtest.
type server struct {
	t       *testing.T
	URL     string
	Port    int
	DataDir string
	http    *http.Client
	*proc
}

// proc is the process itself.
type proc struct {
	cmd     *exec.Cmd
	out     *lockedBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // read only after done is closed
}

// on returns s for use by test t (a subtest): its failures go to t.
func (s *server) on(t *testing.T) *server {
	c := *s
	c.t = t
	return &c
}

// startServer starts `corral up` with 8 simulated GPUs on a fresh port and a
// fresh data directory and waits until it answers /healthz.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerAt(t, t.TempDir(), freePort(t))
}

// startServerAt starts `corral up` on the given data directory and port and
// waits until it answers /healthz. The process is stopped in t.Cleanup.
func startServerAt(t *testing.T, dataDir string, port int) *server {
	t.Helper()
	return startControl(t, dataDir, port, nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node")
}

// startControl starts a control plane (`corral up` or `corral server`,
// args[0]) on the given data directory and port, with the given extra
// environment, and waits until it answers /healthz. The process is stopped
// in t.Cleanup.
func startControl(t *testing.T, dataDir string, port int, env []string, args ...string) *server {
	t.Helper()
	s := startServing(t, dataDir, port, env, args...)
	if slices.Contains(args, "--store") && strings.Contains(strings.Join(args, " "), "postgres") {
		s.waitLeader(60 * time.Second) // a follower answers /healthz before it leads (failover_test.go)
	}
	return s
}

// startServing is startControl without waiting for a server on
// PostgreSQL to lead: it returns once /healthz answers, as a follower's does.
func startServing(t *testing.T, dataDir string, port int, env []string, args ...string) *server {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &server{
		t: t, URL: "http://" + addr, Port: port, DataDir: dataDir,
		http: &http.Client{Timeout: 30 * time.Second, Transport: newWithToken(adminToken)},
		proc: &proc{out: &lockedBuffer{}, done: make(chan struct{})},
	}
	s.cmd = exec.Command(corralBin, append(args, "--listen", addr, "--data-dir", dataDir, "--cancel-grace", "2s")...)
	// Every test server has the same admin token, and its own client
	// config file (corral up writes one), so nothing leaks between tests
	// or into the home directory. Its home is empty too: the jobs and
	// shells it runs (as the agent's own account) read no rc file of the
	// machine's (a ~/.bashrc that stalls an interactive bash would hang
	// the shell tests).
	s.cmd.Env = cleanEnv(append([]string{"CORRAL_ADMIN_TOKEN=" + adminToken, "HOME=" + t.TempDir(),
		"CORRAL_CONFIG=" + filepath.Join(t.TempDir(), "client.json")}, env...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start corral %s: %v", args[0], err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	if args[0] == "up" {
		t.Cleanup(func() { crashJobs(dataDir) }) // after s.stop: its jobs outlive it (restart_test.go)
	}
	t.Cleanup(s.stop)

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("corral up exited before it was ready (%v); output:\n%s", s.waitErr, s.out.String())
		default:
		}
		if s.healthy() {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("corral up did not answer /healthz within 30s; output:\n%s", s.out.String())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// healthy reports whether GET /healthz answers 200 now.
func (s *server) healthy() bool {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(s.URL + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// PID is the server process's id.
func (s *server) PID() int { return s.cmd.Process.Pid }

// exited reports whether the server process has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// kill9 sends SIGKILL to the server and waits until it is gone.
func (s *server) kill9() {
	s.t.Helper()
	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Fatalf("kill -9 corral up: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("corral up did not die within 10s of SIGKILL")
	}
}

// stop ends the server: SIGTERM (its jobs run on), then SIGKILL if it
// does not exit in time. On a failed test it prints the server's output.
func (s *server) stop() {
	// Connections the client dialled but never used would hold up the
	// server's graceful shutdown for 5s (net/http treats them as active).
	s.http.CloseIdleConnections()
	if !s.exited() {
		syscall.Kill(s.PID(), syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			syscall.Kill(s.PID(), syscall.SIGKILL)
			<-s.done
		}
	}
	if strings.Contains(s.out.String(), "WARNING: DATA RACE") {
		s.t.Errorf("corral up on %s reported a data race", s.URL)
	}
	if s.t.Failed() {
		out := s.out.String()
		if len(out) > 20000 {
			out = "...\n" + out[len(out)-20000:]
		}
		s.t.Logf("output of corral up on %s (data %s):\n%s", s.URL, s.DataDir, out)
		if b, err := os.ReadFile(filepath.Join(s.DataDir, "agent", "shim-host.log")); err == nil && len(b) > 0 {
			s.t.Logf("its shim host's log:\n%s", b)
		}
	}
}

// adminToken is the bootstrap admin token of every test server
// (CORRAL_ADMIN_TOKEN); s.send and runCLI present it unless told
// otherwise.
const adminToken = "e2e-admin-token-0123456789abcdef"

// withToken sends requests with "Authorization: Bearer token" unless they
// set an Authorization header themselves (set it to "" to send none).
type withToken struct {
	token string
	base  *http.Transport
}

func newWithToken(token string) *withToken {
	base := http.DefaultTransport.(*http.Transport).Clone()
	// A request that asks first (Expect: 100-continue) waits for the
	// server's answer however loaded the machine is, rather than
	// sending its body after a second and racing the server's close.
	base.ExpectContinueTimeout = 30 * time.Second
	return &withToken{token: token, base: base}
}

func (w *withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, ok := r.Header["Authorization"]; !ok {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+w.token)
	} else if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Del("Authorization")
	}
	return w.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (w *withToken) CloseIdleConnections() { w.base.CloseIdleConnections() }

// response is an HTTP answer, read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("HTTP %d %s", r.Status, truncate(string(r.Body), 600))
}

// send does one request. body is nil (no body), a string or []byte (sent
// as is) or anything else (sent as JSON). It returns an error only when no
// answer came.
func (s *server) send(method, path string, body any, headers map[string]string) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// do is send that fails the test when no answer came.
func (s *server) do(method, path string, body any, headers map[string]string) response {
	s.t.Helper()
	r, err := s.send(method, path, body, headers)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// mustJSON does a request, requires the status and decodes the body into v
// (when v is not nil).
func (s *server) mustJSON(method, path string, body any, wantStatus int, v any) response {
	s.t.Helper()
	r := s.do(method, path, body, nil)
	if r.Status != wantStatus {
		s.t.Fatalf("%s %s: want HTTP %d, got %s", method, path, wantStatus, r)
	}
	if v != nil {
		if err := json.Unmarshal(r.Body, v); err != nil {
			s.t.Fatalf("%s %s: decoding %T: %v; body: %s", method, path, v, err, truncate(string(r.Body), 600))
		}
	}
	return r
}

// submit submits a job and requires 201.
func (s *server) submit(req map[string]any) api.Job {
	s.t.Helper()
	var j api.Job
	s.mustJSON("POST", "/queue/submit", req, http.StatusCreated, &j)
	if j.ID == "" {
		s.t.Fatalf("submit answered a job without an id")
	}
	return j
}

// job reads one job with its events.
func (s *server) job(id string) api.Job {
	s.t.Helper()
	var j api.Job
	s.mustJSON("GET", "/jobs/"+id, nil, http.StatusOK, &j)
	return j
}

// jobs lists every job (newest first).
func (s *server) jobs() []api.Job {
	s.t.Helper()
	var l api.JobList
	s.mustJSON("GET", "/jobs?limit=100000", nil, http.StatusOK, &l)
	return l.Jobs
}

// cluster reads GET /cluster/gpu-status.
func (s *server) cluster() api.ClusterStatus {
	s.t.Helper()
	var c api.ClusterStatus
	s.mustJSON("GET", "/cluster/gpu-status", nil, http.StatusOK, &c)
	return c
}

// logs reads a job's output.
func (s *server) logs(id string) string {
	s.t.Helper()
	r := s.do("GET", "/jobs/"+id+"/logs", nil, nil)
	if r.Status != http.StatusOK {
		s.t.Fatalf("logs of %s: %s", id, r)
	}
	return string(r.Body)
}

// waitJob polls a job until cond holds and returns it.
func (s *server) waitJob(id string, timeout time.Duration, what string, cond func(api.Job) bool) api.Job {
	s.t.Helper()
	var j api.Job
	waitFor(s.t, timeout, func() string {
		return fmt.Sprintf("job %s %s (state %s, reason %q, pending %q)", id, what, j.State, j.Reason, j.PendingReason)
	}, func() bool {
		j = s.job(id)
		return cond(j)
	})
	return j
}

// waitState polls a job until it is in the given state.
func (s *server) waitState(id string, state api.State, timeout time.Duration) api.Job {
	s.t.Helper()
	return s.waitJob(id, timeout, "to be "+string(state), func(j api.Job) bool {
		if j.State.Terminal() && j.State != state {
			s.t.Fatalf("job %s ended %s (reason %q: %s) while waiting for %s; log:\n%s",
				id, j.State, j.Reason, j.Message, state, s.logs(id))
		}
		return j.State == state
	})
}

// waitTerminal polls a job until it has ended.
func (s *server) waitTerminal(id string, timeout time.Duration) api.Job {
	s.t.Helper()
	return s.waitJob(id, timeout, "to end", func(j api.Job) bool { return j.State.Terminal() })
}

// waitAllGPUsFree polls until every GPU is available.
func (s *server) waitAllGPUsFree(timeout time.Duration) {
	s.t.Helper()
	var c api.ClusterStatus
	waitFor(s.t, timeout, func() string {
		return fmt.Sprintf("all 8 GPUs to be available (available %d, allocated %d)", c.AvailableGPUs, c.AllocatedGPUs)
	}, func() bool {
		c = s.cluster()
		return c.TotalGPUs == 8 && c.AvailableGPUs == 8 && c.AllocatedGPUs == 0
	})
}

// waitFor polls cond every 20ms until it holds, failing the test with
// what() after timeout. It is the only way these tests wait.
func waitFor(t *testing.T, timeout time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// errorBody checks that r is a JSON error per SPEC and returns it.
func errorBody(t *testing.T, r response) api.ErrorDetail {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error answer has Content-Type %q, want application/json; body %s", ct, truncate(string(r.Body), 300))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatalf("error answer is not a JSON object: %v; body %s", err, truncate(string(r.Body), 300))
	}
	if len(raw) != 1 || raw["error"] == nil {
		t.Errorf(`error answer must be {"error": {...}} alone, got %s`, truncate(string(r.Body), 300))
	}
	var e api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error answer does not have the shape {error:{code,message,field}}: %v; body %s", err, truncate(string(r.Body), 300))
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Errorf("error answer lacks a code or a message: %s", truncate(string(r.Body), 300))
	}
	return e.Error
}

// runCLI runs the corral binary with the given environment additions; it
// presents the admin token unless env sets CORRAL_TOKEN.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(corralBin, args...)
	cmd.Env = cleanEnv(append([]string{"CORRAL_TOKEN=" + adminToken, "CORRAL_CONFIG=" + filepath.Join(t.TempDir(), "client.json")}, env...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("corral %v: %v", args, err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("corral %v: %v", args, err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("corral %v did not finish within 30s; stderr: %s", args, e.String())
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// processGone reports whether pid no longer runs: absent, or a zombie
// waiting for init (in containers init may reap late or never).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH)
	}
	// /proc/PID/stat: "PID (COMM) STATE ...": COMM may hold spaces or ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state == 'Z' || state == 'X'
}

// readPID reads a pid a job wrote to a file.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 1 {
			t.Fatalf("pid file %s holds %q", path, string(b))
		}
		pids = append(pids, n)
	}
	return pids
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// eventStates lists the states a job's events moved to.
func eventStates(j api.Job) []api.State {
	out := make([]api.State, len(j.Events))
	for i, e := range j.Events {
		out[i] = e.To
	}
	return out
}

// gpuSet is the sorted GPU indexes of an allocation.
func gpuSet(a []api.Allocation) []int {
	out := make([]int, 0, len(a))
	for _, x := range a {
		out = append(out, x.GPUID)
	}
	slices.Sort(out)
	return out
}

// parseGPUList reads "0,3,5" into sorted indexes.
func parseGPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("GPU list %q: %w", s, err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
