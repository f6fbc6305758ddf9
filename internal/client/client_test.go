package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// recorded is one request a test server saw.
type recorded struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// recorder is an httptest server that records requests and answers with a
// handler chosen by the test.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	srv  *httptest.Server
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		h(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return r.reqs[len(r.reqs)-1]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestSubmitSendsBodyAndHeaders(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, api.Job{ID: "01JTEST", State: api.StateQueued, QueuePosition: 2, Priority: api.PriorityHigh})
	})
	two := 2
	c := New(rec.srv.URL, WithToken("s3cret"))
	job, err := c.Submit(context.Background(), api.SubmitRequest{
		Command: "python train.py", GPUCount: &two,
		Priority: jsonString("high"), EstimatedDuration: jsonString("2h"),
	}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if job.ID != "01JTEST" || job.QueuePosition != 2 {
		t.Errorf("job = %+v", job)
	}
	got := rec.last(t)
	if got.Method != http.MethodPost || got.Path != "/queue/submit" {
		t.Errorf("request = %s %s", got.Method, got.Path)
	}
	if k := got.Header.Get("Idempotency-Key"); k != "key-1" {
		t.Errorf("Idempotency-Key = %q", k)
	}
	if a := got.Header.Get("Authorization"); a != "Bearer s3cret" {
		t.Errorf("Authorization = %q", a)
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"command": "python train.py", "gpu_count": 2.0, "priority": "high", "estimated_duration": "2h"}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("body[%s] = %v, want %v (body %s)", k, body[k], v, got.Body)
		}
	}
}

func TestNoIdempotencyKeyOrTokenWhenEmpty(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, api.Job{ID: "x", Priority: api.PriorityNormal})
	})
	if _, err := New(rec.srv.URL).Submit(context.Background(), api.SubmitRequest{Command: "true"}, ""); err != nil {
		t.Fatal(err)
	}
	got := rec.last(t)
	if _, ok := got.Header["Idempotency-Key"]; ok {
		t.Error("Idempotency-Key sent without a key")
	}
	if _, ok := got.Header["Authorization"]; ok {
		t.Error("Authorization sent without a token")
	}
}

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		want    api.Error
		matches error
	}{
		{"api error", 422, "application/json", `{"error":{"code":"invalid_field","message":"must be at least 0","field":"gpu_count"}}`,
			api.Error{Status: 422, Code: "invalid_field", Message: "must be at least 0", Field: "gpu_count"}, api.ErrInvalid},
		{"not found", 404, "application/json", `{"error":{"code":"not_found","message":"no job 01X"}}`,
			api.Error{Status: 404, Code: "not_found", Message: "no job 01X"}, api.ErrNotFound},
		{"plain text", 502, "text/plain", "bad gateway from proxy\n",
			api.Error{Status: 502, Message: "bad gateway from proxy"}, nil},
		{"other json", 409, "application/json", `{"detail":"nope"}`,
			api.Error{Status: 409, Message: `{"detail":"nope"}`}, api.ErrConflict},
		{"empty", 500, "text/plain", "",
			api.Error{Status: 500, Message: "Internal Server Error"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := New(rec.srv.URL).Job(context.Background(), "01X")
			var ae *api.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want *api.Error", err, err)
			}
			if *ae != tt.want {
				t.Errorf("err = %+v, want %+v", *ae, tt.want)
			}
			if tt.matches != nil && !errors.Is(err, tt.matches) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.matches)
			}
			if errors.Is(err, ErrUnreachable) {
				t.Error("an HTTP answer must not count as unreachable")
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, err := New(addr).Queue(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	msg := err.Error()
	for _, want := range []string{"cannot reach the Corral server at " + addr, "connection refused", `"corral up"`, "CORRAL_SERVER", "--server"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestTimeoutIsUnreachable(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	_, err := New(srv.URL, WithTimeout(50*time.Millisecond)).Cluster(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want a timeout wrapping ErrUnreachable", err)
	}
}

func TestCallerCancelIsNotUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := New(srv.URL).Queue(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
}

func TestLogsStreaming(t *testing.T) {
	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fl := w.(http.Flusher)
		_, _ = io.WriteString(w, "line 1\n")
		fl.Flush()
		<-release
		_, _ = io.WriteString(w, "line 2\n")
	})
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	attempt := 2
	go func() {
		err := New(rec.srv.URL).LogsWith(context.Background(), "01J", LogsOptions{Follow: true, Attempt: &attempt}, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(pr, buf, len("line 1\n"))
	if err != nil || string(buf[:n]) != "line 1\n" {
		t.Fatalf("first chunk = %q, %v; want it before the stream ends", buf[:n], err)
	}
	close(release)
	rest, _ := io.ReadAll(pr)
	if string(rest) != "line 2\n" {
		t.Errorf("rest = %q", rest)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := rec.last(t)
	if got.Path != "/jobs/01J/logs" || got.Query != "attempt=2&follow=true" { // one base: attempt 2 is the API's 2
		t.Errorf("request = %s?%s", got.Path, got.Query)
	}
}

func TestLogsError(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no job nope"}})
	})
	var out bytes.Buffer
	err := New(rec.srv.URL).Logs(context.Background(), "nope", false, &out)
	if !errors.Is(err, api.ErrNotFound) || out.Len() != 0 {
		t.Fatalf("err = %v, out = %q", err, out.String())
	}
}

func TestRequests(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodDelete:
			writeJSON(w, http.StatusAccepted, api.Job{ID: "a/b", State: api.StateRunning, CancelRequested: true, Priority: api.PriorityLow})
		case strings.HasPrefix(r.URL.Path, "/orchestrator/status"), strings.HasSuffix(r.URL.Path, "start"), strings.HasSuffix(r.URL.Path, "stop"):
			writeJSON(w, 200, api.OrchestratorStatus{Running: true})
		default:
			_, _ = io.WriteString(w, "{}")
		}
	})
	c := New(strings.TrimPrefix(rec.srv.URL, "http://") + "/") // host:port, trailing slash
	ctx := context.Background()
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	policy := "fcfs"
	tests := []struct {
		call                    func() error
		method, path, query, in string
	}{
		{func() error { _, err := c.Queue(ctx); return err }, "GET", "/queue", "limit=100000", ""},
		{func() error { _, err := c.QueuePage(ctx, 20, "40"); return err }, "GET", "/queue", "cursor=40&limit=20", ""},
		{func() error {
			_, err := c.Jobs(ctx, JobFilter{User: "ann", Until: since, Cursor: "j0abc", Limit: 5})
			return err
		}, "GET", "/jobs", "cursor=j0abc&limit=5&until=2025-01-02T03%3A04%3A05Z&user=ann", ""},
		{func() error { _, err := c.QueueStats(ctx); return err }, "GET", "/queue/statistics", "", ""},
		{func() error {
			j, err := c.Cancel(ctx, "a/b", 10*time.Second)
			if err == nil && !j.CancelRequested {
				err = fmt.Errorf("job = %+v", j)
			}
			return err
		}, "DELETE", "/queue/a/b", "grace=10s", ""},
		{func() error { _, err := c.SetPriority(ctx, "j1", "high"); return err }, "PATCH", "/queue/j1/priority", "", `{"priority":"high"}`},
		{func() error {
			_, err := c.Jobs(ctx, JobFilter{State: api.StateFailed, User: "ann", Since: since, Limit: 5})
			return err
		}, "GET", "/jobs", "limit=5&since=2025-01-02T03%3A04%3A05Z&state=failed&user=ann", ""},
		{func() error { _, err := c.Job(ctx, "j1"); return err }, "GET", "/jobs/j1", "", ""},
		{func() error { _, err := c.Cluster(ctx); return err }, "GET", "/cluster/gpu-status", "", ""},
		{func() error { _, err := c.Allocate(ctx, api.AllocateRequest{JobID: "ext", GPUCount: 1}); return err },
			"POST", "/cluster/gpu-allocate", "", `{"job_id":"ext","gpu_count":1}`},
		{func() error { _, err := c.Release(ctx, api.ReleaseRequest{JobID: "ext"}); return err },
			"POST", "/cluster/gpu-release", "", `{"job_id":"ext"}`},
		{func() error { _, err := c.OrchestratorStatus(ctx); return err }, "GET", "/orchestrator/status", "", ""},
		{func() error { _, err := c.StartOrchestrator(ctx); return err }, "POST", "/orchestrator/start", "", ""},
		{func() error { _, err := c.StopOrchestrator(ctx); return err }, "POST", "/orchestrator/stop", "", ""},
		{func() error { _, err := c.Policies(ctx); return err }, "GET", "/orchestrator/policies", "", ""},
		{func() error { _, err := c.SetPolicies(ctx, api.PoliciesUpdate{Policy: &policy}); return err },
			"PUT", "/orchestrator/policies", "", `{"policy":"fcfs"}`},
	}
	for _, tt := range tests {
		if err := tt.call(); err != nil {
			t.Errorf("%s %s: %v", tt.method, tt.path, err)
			continue
		}
		got := rec.last(t)
		if got.Method != tt.method || got.Path != tt.path || got.Query != tt.query || string(got.Body) != tt.in {
			t.Errorf("sent %s %s?%s %s, want %s %s?%s %s", got.Method, got.Path, got.Query, got.Body, tt.method, tt.path, tt.query, tt.in)
		}
	}
}

func TestEmptyIDIsRefused(t *testing.T) {
	c := New("http://127.0.0.1:1")
	if _, err := c.Job(context.Background(), " "); err == nil || errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want an empty-id error", err)
	}
}

func TestNormalizeServerURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", DefaultServer},
		{"localhost:7450", "http://localhost:7450"},
		{":9000", "http://127.0.0.1:9000"},
		{"https://corral.example.com/", "https://corral.example.com"},
		{"http://10.0.0.1:7450/prefix/", "http://10.0.0.1:7450/prefix"},
		{"ftp://x", ""},
		{"http://", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeServerURL(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("NormalizeServerURL(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeServerURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := New("ftp://x").Queue(context.Background()); err == nil {
		t.Error("a client with a bad address must fail")
	}
}

// TestSubmitRefusesInvalidUTF8: a command (or any field) that is not
// UTF-8 is refused before it is sent, naming the field; JSON would have
// carried it rewritten.
func TestSubmitRefusesInvalidUTF8(t *testing.T) {
	sent := false
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		sent = true
		writeJSON(w, http.StatusCreated, api.Job{ID: "x", Priority: api.PriorityNormal})
	})
	for _, tc := range []struct {
		req   api.SubmitRequest
		field string
	}{
		{api.SubmitRequest{Command: "echo \xff"}, "command"},
		{api.SubmitRequest{Command: "true", Name: "n\xc0"}, "name"},
		{api.SubmitRequest{Command: "true", Env: map[string]string{"K": "\xed\xa0\x80"}}, "env"},
	} {
		_, err := New(rec.srv.URL).Submit(context.Background(), tc.req, "")
		if e := api.AsError(err); err == nil || e.Status != 422 || e.Field != tc.field {
			t.Errorf("%+v: %v, want 422 naming %s", tc.req, err, tc.field)
		}
	}
	if sent {
		t.Fatal("a request was sent")
	}
}

// TestLogsEndedByRevocation: a followed log that the server ends because
// the token was revoked (its X-Corral-Stream-End trailer) is an error that
// says so, not a quiet end that reads like the job's.
func TestLogsEndedByRevocation(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Corral-Stream-End")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "tick\n")
		w.Header().Set("X-Corral-Stream-End", "token_revoked")
	})
	var out bytes.Buffer
	err := New(rec.srv.URL).Logs(context.Background(), "01J", true, &out)
	if e := api.AsError(err); err == nil || e.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "revoked") || out.String() != "tick\n" {
		t.Fatalf("err = %v, output %q; want the output, then a 401 saying the token was revoked", err, out.String())
	}
}

// TestOversizedSubmitGetsTheAnswer: a server that refuses a large body
// unread (as Corral's does past 1 MiB) and closes the connection; the
// client asks first, so it reads the 413 rather than meeting a reset while
// it still writes the body.
func TestOversizedSubmitGetsTheAnswer(t *testing.T) {
	var mu sync.Mutex
	expect := map[bool]string{} // large body or not: the Expect header seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		large := r.ContentLength > 1<<20
		mu.Lock()
		expect[large] = r.Header.Get("Expect")
		mu.Unlock()
		if large {
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusRequestEntityTooLarge, api.ErrorBody{Error: api.ErrorDetail{Code: "too_large", Message: "request body too large"}})
			return
		}
		writeJSON(w, http.StatusCreated, api.Job{ID: "01JSMALL", State: api.StateQueued, Priority: api.PriorityNormal})
	}))
	defer srv.Close()
	c := New(srv.URL)
	for i := range 10 {
		_, err := c.Submit(context.Background(), api.SubmitRequest{Command: strings.Repeat("x", 4<<20)}, "")
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("submission %d: %v, want the server's 413", i, err)
		}
	}
	if _, err := c.Submit(context.Background(), api.SubmitRequest{Command: "true"}, ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if expect[true] != "100-continue" || expect[false] != "" {
		t.Errorf("Expect header: large body %q, small body %q; want 100-continue and none", expect[true], expect[false])
	}
}
