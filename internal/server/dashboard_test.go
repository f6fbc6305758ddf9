package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/web"
)

// runExec reports every start at once, as a real executor does once the
// process runs. Set o before the first submission.
type runExec struct{ o *orchestrator.Orchestrator }

func (r *runExec) Start(_ context.Context, t exec.Task) error {
	r.o.Sink(exec.Update{JobID: t.JobID, Attempt: t.Attempt, Kind: exec.Started, At: time.Now(), PID: 1})
	return nil
}

func (r *runExec) Stop(context.Context, string, int, time.Duration) error { return nil }

// busyServer runs a server whose jobs start at once, with two jobs
// running (2 GPUs each, one since ended) and one queued (8 GPUs).
func busyServer(t *testing.T) (ts *testServer) {
	t.Helper()
	re := &runExec{}
	srv, o := newServerWith(t, re, slog.New(slog.DiscardHandler))
	re.o = o
	ts = &testServer{t: t, url: srv.URL, o: o}
	a := ts.submit(`{"name":"train","user":"alice","project":"nlp","command":"x","gpu_count":2}`)
	b := ts.submit(`{"name":"tune","user":"bob","project":"vision","command":"x","gpu_count":2}`)
	ts.submit(`{"name":"big","user":"carol","project":"nlp","command":"x","gpu_count":8}`)
	for _, id := range []string{a.ID, b.ID} {
		ts.waitState(id, api.StateRunning)
	}
	o.Sink(exec.Update{JobID: b.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 0})
	ts.waitState(b.ID, api.StateCompleted)
	return ts
}

type testServer struct {
	t   *testing.T
	url string
	o   *orchestrator.Orchestrator
}

func (s *testServer) get(path string, v any) int {
	s.t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			s.t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

func (s *testServer) submit(body string) api.Job {
	s.t.Helper()
	resp, err := http.Post(s.url+"/queue/submit", "application/json", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var j api.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != 201 {
		s.t.Fatalf("submit: %d %v", resp.StatusCode, err)
	}
	return j
}

// waitState waits for the job's state on the orchestrator's change
// notifications.
func (s *testServer) waitState(id string, want api.State) {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		changed := s.o.Changed()
		if j, err := s.o.Job(id); err == nil && j.State == want {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			j, _ := s.o.Job(id)
			s.t.Fatalf("job %s is %s, want %s", id, j.State, want)
		}
	}
}

func TestDashboardServed(t *testing.T) {
	ts := newTestServer(t)
	resp, body := call(t, ts, "GET", "/", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), `<main id="main">`) {
		t.Fatalf("GET /: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}
	for path, ctype := range map[string]string{"/ui/app.js": "javascript", "/ui/api.js": "javascript", "/ui/charts.js": "javascript", "/ui/app.css": "text/css", "/ui/favicon.svg": "image/svg+xml"} {
		resp, body := call(t, ts, "GET", path, "")
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if resp, _ := call(t, ts, "GET", "/ui/nope.js", ""); resp.StatusCode != 404 {
		t.Errorf("GET /ui/nope.js: %d", resp.StatusCode)
	}
	// No request leaves the server: no asset names another origin.
	fs.WalkDir(web.Static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(web.Static, path)
		b = bytes.ReplaceAll(b, []byte("http://www.w3.org/2000/svg"), nil) // a namespace, not a request
		if bytes.Contains(b, []byte("http://")) || bytes.Contains(b, []byte("https://")) || bytes.Contains(b, []byte("//cdn")) {
			t.Errorf("%s refers to another origin", path)
		}
		return nil
	})
}

func TestHistory(t *testing.T) {
	ts := busyServer(t)
	ts.o.SampleHistory(context.Background())
	var h api.History
	if code := ts.get("/history?since=1h&node=all", &h); code != 200 || len(h.Points) == 0 {
		t.Fatalf("GET /history: %d %+v", code, h)
	}
	// The loop's own first sample may share a step with this one (gauges
	// are averaged) or not (counts are split): sum the counts, and check
	// the gauges of the last step loosely.
	started, completed := 0, 0
	for _, p := range h.Points {
		started, completed = started+p.Started, completed+p.Completed
	}
	p := h.Points[len(h.Points)-1]
	if started != 2 || completed != 1 || p.TotalGPUs != 8 || p.AllocatedGPUs <= 0 || p.AllocatedGPUs > 2 || p.Queued <= 0 || p.Queued > 1 {
		t.Fatalf("%d started, %d completed; last point %+v", started, completed, p)
	}
	if len(p.Nodes) != 1 || p.Nodes[0].NodeID != "n1" || p.Nodes[0].AllocatedGPUs <= 0 || p.Nodes[0].GPUs != 8 {
		t.Fatalf("node points %+v", p.Nodes)
	}
	if h.Interval != api.Seconds(history.Interval.Seconds()) {
		t.Fatalf("interval %v", h.Interval)
	}
	// Without node=, no per-node series.
	var plain api.History
	if ts.get("/history", &plain); len(plain.Points) == 0 || plain.Points[len(plain.Points)-1].Nodes != nil {
		t.Fatalf("GET /history: %+v", plain)
	}
	for path, want := range map[string]int{"/history?node=nope": 404, "/history?points=0": 422, "/history?since=soon": 422} {
		if code := ts.get(path, nil); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
}

func TestQueueStatisticsView(t *testing.T) {
	ts := busyServer(t)
	var s api.QueueStatistics
	if code := ts.get("/queue/statistics", &s); code != 200 {
		t.Fatalf("GET /queue/statistics: %d", code)
	}
	if s.TotalQueued != 1 || s.TotalRunning != 1 || s.QueueThroughput != 2 || s.CompletedLastHour != 1 || s.WaitTimeP99 < s.WaitTimeP50 {
		t.Fatalf("statistics %+v", s)
	}
	var q api.QueueResponse
	ts.get("/queue", &q)
	if len(q.QueuedJobs) != 1 || q.QueuedJobs[0].Name != "big" || q.QueuedJobs[0].QueuePosition != 1 || q.QueuedJobs[0].PendingMessage == "" {
		t.Fatalf("queue %+v", q.QueuedJobs)
	}
}

func TestMetricsView(t *testing.T) {
	ts := busyServer(t)
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	text := b.String()
	for _, want := range []string{
		`corral_jobs{state="running"} 1`,
		`corral_jobs{state="completed"} 1`,
		`corral_queue_length{priority="normal"} 1`,
		`corral_gpus{state="allocated"} 2`,
		`corral_gpus{state="free"} 6`,
		`corral_nodes{state="up"} 1`,
		`corral_gpu_utilization_percent{gpu="0",model="H100",node="n1",uuid="GPU-sim-n1-0"}`,
		`corral_gpu_memory_used_mib{gpu="0"`,
		`corral_gpu_memory_free_mib{gpu="0"`,
		`corral_gpu_temperature_celsius{gpu="0"`,
		`corral_gpu_allocated{gpu="0"`,
		`corral_gpu_info{gpu="0",model="H100",node="n1",simulated="true",state="`,
		`corral_job_submissions_total 3`,
		`corral_job_starts_total 2`,
		`corral_jobs_finished_total{state="completed"} 1`,
		`corral_job_wait_seconds_count 2`,
		`corral_job_wait_seconds_bucket{le="86400"} 2`,
		`corral_scheduling_cycle_duration_seconds_count`,
		`corral_api_request_duration_seconds_count{code="201",route="POST /queue/submit"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestEventsStream(t *testing.T) {
	ts := busyServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a fail-safe, not a measurement
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := readEvents(t, resp.Body) // events_delta_test.go
	next := func() api.DashboardUpdate {
		t.Helper()
		events.next()
		return events.state
	}
	u := next()
	if u.Cluster.TotalGPUs != 8 || len(u.Active) != 1 || u.Active[0].Name != "train" || len(u.Queue.QueuedJobs) != 1 || !u.Status.Running {
		t.Fatalf("first update: %d GPUs, active %+v, queue %+v", u.Cluster.TotalGPUs, u.Active, u.Queue.QueuedJobs)
	}
	// A change arrives as a new update.
	j := ts.submit(`{"name":"late","user":"dave","command":"x","gpu_count":1}`)
	for {
		u = next()
		for _, a := range u.Active {
			if a.ID == j.ID {
				return
			}
		}
	}
}

// lockedLog collects log output from the server's goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRequestIDsInJSONLogs: each call gets a request id (the caller's, or
// a new one), answered in X-Request-Id and logged with the request.
func TestRequestIDsInJSONLogs(t *testing.T) {
	var logs lockedLog
	srv, _ := newServerWith(t, idleExec{}, slog.New(slog.NewJSONHandler(&logs, nil)))
	req, _ := http.NewRequest("POST", srv.URL+"/queue/submit", strings.NewReader(`{"command":"x","gpu_count":1}`))
	req.Header.Set("X-Request-Id", "req-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") != "req-42" {
		t.Fatalf("X-Request-Id %q", resp.Header.Get("X-Request-Id"))
	}
	resp, _ = call(t, srv, "GET", "/jobs/nope", "")
	generated := resp.Header.Get("X-Request-Id")
	if len(generated) != 16 {
		t.Fatalf("generated X-Request-Id %q", generated)
	}
	found := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "request" {
			found[rec["request_id"].(string)] = true
		}
	}
	if !found["req-42"] || !found[generated] {
		t.Fatalf("request ids logged: %v\n%s", found, logs.String())
	}
}
