package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/store"
)

// idleExec starts nothing; the server tests only look at the API.
type idleExec struct{}

func (idleExec) Start(context.Context, exec.Task) error                 { return nil }
func (idleExec) Stop(context.Context, string, int, time.Duration) error { return nil }

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	ts, _ := newServerWith(t, idleExec{}, slog.New(slog.DiscardHandler))
	return ts
}

// testAdminToken is the bootstrap admin token of the test servers.
const testAdminToken = "test-admin-token-0123456789"

// newServerWith is newTestServer with the executor and logger given; it
// returns the orchestrator too. Requests that carry no credentials get
// the admin token (the tests that are not about access); newAuthServer
// gives the server as it is.
func newServerWith(t *testing.T, ex exec.Executor, logger *slog.Logger) (*httptest.Server, *orchestrator.Orchestrator) {
	t.Helper()
	h, o, _ := newHandler(t, ex, logger)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && r.Header.Get("Cookie") == "" {
			r.Header.Set("Authorization", "Bearer "+testAdminToken)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, o
}

// newHandler builds a server over a fresh store and orchestrator (8
// simulated GPUs on node n1) with testAdminToken as its admin token.
func newHandler(t testing.TB, ex exec.Executor, logger *slog.Logger, opts ...Option) (*Server, *orchestrator.Orchestrator, *auth.Service) {
	t.Helper()
	_, o, a := newBackend(t, ex, logger)
	return New(o, logger, append([]Option{WithAuth(a)}, opts...)...), o, a
}

// newBackend opens a fresh store, runs an orchestrator over it (8
// simulated GPUs on node n1) and a token service with testAdminToken as
// its admin token; all of it stops when the test ends.
func newBackend(t testing.TB, ex exec.Executor, logger *slog.Logger) (*store.Store, *orchestrator.Orchestrator, *auth.Service) {
	t.Helper()
	src := gpu.NewSimulated("n1", gpu.SimSpec{Count: 8, Model: "H100", MemoryGB: 80})
	devs, _ := src.Devices(context.Background())
	return newBackendOf(t, ex, logger, []orchestrator.Node{{ID: "n1", Devices: devs, Telemetry: src, Simulated: true}})
}

// newBackendOf is newBackend over the nodes given.
func newBackendOf(t testing.TB, ex exec.Executor, logger *slog.Logger, nodes []orchestrator.Node) (*store.Store, *orchestrator.Orchestrator, *auth.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := orchestrator.New(ctx, orchestrator.Config{Store: st, Executor: ex, DataDir: t.TempDir(), Logger: logger, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Bootstrap(ctx, testAdminToken, "root"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	return st, o, a
}

func call(t *testing.T, ts *httptest.Server, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestErrorsAreJSON(t *testing.T) {
	ts := newTestServer(t)
	tests := map[string]struct {
		method, path, body string
		status             int
		code, field        string
	}{
		"unknown route":      {"GET", "/nope", "", 404, "not_found", ""},
		"wrong method":       {"GET", "/queue/submit", "", 405, "method_not_allowed", ""},
		"wrong method param": {"POST", "/queue/abc", "", 405, "method_not_allowed", ""},
		"unknown job":        {"GET", "/jobs/abc", "", 404, "not_found", ""},
		// An escaped slash is part of a segment: no route's path, not a
		// route's for another method (it answered 405 "use DELETE").
		"escaped slash, the route's method": {"DELETE", "/queue%2Fabcdef12", "", 404, "not_found", ""},
		"escaped slash, another method":     {"GET", "/queue%2Fabcdef12", "", 404, "not_found", ""},
		"escaped slash, a read":             {"GET", "/jobs%2Fabcdef12", "", 404, "not_found", ""},
		"escaped slash, a token":            {"DELETE", "/auth/tokens%2Fnope", "", 404, "not_found", ""},
		"unknown token":                     {"DELETE", "/auth/tokens/nope", "", 404, "not_found", ""},
		"type error":                        {"POST", "/queue/submit", `{"command":"x","gpu_count":"two"}`, 422, "invalid_field", "gpu_count"},
		"unknown field":                     {"POST", "/queue/submit", `{"command":"x","gpus":2}`, 400, "unknown_field", "gpus"},
		"two values":                        {"POST", "/queue/submit", `{"command":"x"} {}`, 400, "malformed_json", ""},
		"bad since":                         {"GET", "/jobs?since=yesterday", "", 422, "invalid_field", "since"},
		"bad limit":                         {"GET", "/jobs?limit=0", "", 422, "invalid_field", "limit"},
		"audit bad since":                   {"GET", "/audit?since=yesterday", "", 422, "invalid_field", "since"},
		"audit bad limit":                   {"GET", "/audit?limit=many", "", 422, "invalid_field", "limit"},
		"bad state":                         {"GET", "/jobs?state=done", "", 422, "invalid_field", "state"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, b := call(t, ts, tc.method, tc.path, tc.body)
			var eb api.ErrorBody
			if err := json.Unmarshal(b, &eb); err != nil {
				t.Fatalf("body is not JSON: %s", b)
			}
			if resp.StatusCode != tc.status || eb.Error.Code != tc.code || eb.Error.Field != tc.field || eb.Error.Message == "" {
				t.Fatalf("got %d %+v, want %d %s %s", resp.StatusCode, eb.Error, tc.status, tc.code, tc.field)
			}
		})
	}
	if resp, _ := call(t, ts, "POST", "/jobs/x/logs", ""); resp.Header.Get("Allow") != "GET" {
		t.Fatalf("Allow = %q", resp.Header.Get("Allow"))
	}
}

// TestOpenAPIMatchesRoutes: every route is described, and every described
// path answers something other than 404 for its method.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ts := newTestServer(t)
	_, b := call(t, ts, "GET", "/openapi.json", "")
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi: %v %s", err, b[:min(len(b), 200)])
	}
	s := New(nil, slog.New(slog.DiscardHandler))
	n := 0
	for _, rt := range s.routes {
		if _, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]; !ok {
			t.Errorf("%s %s is not in /openapi.json", rt.method, rt.path)
		}
		n++
	}
	described := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			described++
			p := strings.NewReplacer("{job_id}", "x", "{id}", "x").Replace(path)
			if streaming[path] {
				if code := streamStatus(t, ts, p); code != 200 {
					t.Errorf("%s %s is described but answers %d", method, path, code)
				}
				continue
			}
			resp, body := call(t, ts, strings.ToUpper(method), p, "{}")
			var eb api.ErrorBody
			json.Unmarshal(body, &eb)
			if resp.StatusCode == 405 || (resp.StatusCode == 404 && eb.Error.Code == "not_found" && strings.HasPrefix(eb.Error.Message, "no route")) {
				t.Errorf("%s %s is described but not served (%d)", method, path, resp.StatusCode)
			}
		}
	}
	if described != n {
		t.Errorf("openapi describes %d operations, the server has %d routes", described, n)
	}
}

// streaming lists the routes that answer with a stream that does not end
// by itself.
var streaming = map[string]bool{"/events": true}

// streamStatus opens a stream, reads its status and closes it.
func streamStatus(t *testing.T, ts *httptest.Server, path string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSubmitAndQueue(t *testing.T) {
	ts := newTestServer(t)
	resp, b := call(t, ts, "POST", "/queue/submit", `{"command":"sleep 1","gpu_count":9}`)
	if resp.StatusCode != 422 || !strings.Contains(string(b), "the largest possible is 8") {
		t.Fatalf("9 GPUs on 8: %d %s", resp.StatusCode, b)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/queue/submit", strings.NewReader(`{"command":"x","gpu_count":2,"priority":"high","estimated_duration":"1h30m"}`))
	req.Header.Set("Idempotency-Key", "k")
	for i := range 2 {
		resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		var j api.Job
		json.NewDecoder(resp.Body).Decode(&j)
		resp.Body.Close()
		req.Body = io.NopCloser(strings.NewReader(`{"command":"x","gpu_count":2,"priority":"high","estimated_duration":"1h30m"}`))
		if resp.StatusCode != 201 || j.Priority != api.PriorityHigh || j.EstimatedDuration == nil || *j.EstimatedDuration != 5400 {
			t.Fatalf("submit %d: %d %+v", i, resp.StatusCode, j)
		}
		if replayed := resp.Header.Get("Idempotent-Replayed") == "true"; replayed != (i == 1) {
			t.Fatalf("submit %d: replayed header %v", i, replayed)
		}
	}
	_, b = call(t, ts, "GET", "/jobs", "")
	var list api.JobList
	if err := json.Unmarshal(b, &list); err != nil || len(list.Jobs) != 1 {
		t.Fatalf("jobs = %s", b)
	}
	_, b = call(t, ts, "GET", "/metrics", "")
	if !strings.Contains(string(b), `corral_jobs{state="allocating"} 1`) {
		t.Fatalf("metrics lack the job:\n%s", b)
	}
}
