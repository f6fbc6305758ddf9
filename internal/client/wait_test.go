package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unreachable", &unreachableError{server: "x", reason: "connection refused", cause: syscall.ECONNREFUSED}, true},
		{"EOF mid-answer", fmt.Errorf("GET /jobs/x: %w", io.EOF), true},
		{"stream broke", fmt.Errorf("logs: %w", io.ErrUnexpectedEOF), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"503", &api.Error{Status: 503}, true},
		{"502", &api.Error{Status: 502}, true},
		{"404", &api.Error{Status: 404}, false},
		{"401", &api.Error{Status: 401}, false},
		{"500", &api.Error{Status: 500}, false},
		{"canceled", context.Canceled, false},
		{"other", errors.New("bad json"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestWaitJobRidesOutOutage: WaitJob keeps polling through 503s within
// Retry, and returns the job once it has ended.
func TestWaitJobRidesOutOutage(t *testing.T) {
	var n atomic.Int32
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			writeJSON(w, 200, api.Job{ID: "j1", State: api.StateRunning, Priority: api.PriorityNormal})
		case 2, 3:
			writeJSON(w, 503, api.ErrorBody{Error: api.ErrorDetail{Code: "unavailable", Message: "starting"}})
		default:
			writeJSON(w, 200, api.Job{ID: "j1", State: api.StateFailed, ExitCode: ptrInt(7), Priority: api.PriorityNormal})
		}
	})
	var retries atomic.Int32
	j, err := New(rec.srv.URL).WaitJob(context.Background(), "j1", WaitOptions{Retry: time.Minute, OnRetry: func(error) { retries.Add(1) }})
	if err != nil || j.State != api.StateFailed || *j.ExitCode != 7 {
		t.Fatalf("WaitJob = %+v, %v; want the failed job", j, err)
	}
	if got := retries.Load(); got != 1 {
		t.Errorf("OnRetry was told %d times of one outage, want 1", got)
	}
	if got := n.Load(); got != 4 {
		t.Errorf("WaitJob sent %d requests, want 4", got)
	}

	// With no Retry, the first 503 ends the wait.
	n.Store(1)
	if _, err := New(rec.srv.URL).WaitJob(context.Background(), "j1", WaitOptions{}); !Transient(err) {
		t.Errorf("WaitJob without Retry through a 503 = %v, want the 503", err)
	}
}

// TestFollowLogsResumes: a followed log that breaks off mid-stream is
// reconnected to the same attempt and the bytes already written are not
// written again; a requeued job's next attempt is followed from its start.
func TestFollowLogsResumes(t *testing.T) {
	var logCalls atomic.Int32
	var queries []url.Values
	var jobCalls atomic.Int32
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs/j1" {
			if jobCalls.Add(1) == 1 {
				writeJSON(w, 200, api.Job{ID: "j1", State: api.StateQueued, RetryCount: 1, Priority: api.PriorityNormal})
				return
			}
			writeJSON(w, 200, api.Job{ID: "j1", State: api.StateFailed, RetryCount: 1, ExitCode: ptrInt(3), Priority: api.PriorityNormal})
			return
		}
		queries = append(queries, r.URL.Query())
		switch logCalls.Add(1) {
		case 1: // attempt 0 breaks off after "hello "
			w.Header().Set("X-Corral-Attempt", "0")
			w.WriteHeader(200)
			io.WriteString(w, "hello ")
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case 2: // attempt 0 again, whole, and over (the job was requeued)
			w.Header().Set("X-Corral-Attempt", "0")
			io.WriteString(w, "hello world\n")
		default: // attempt 1
			w.Header().Set("X-Corral-Attempt", "1")
			io.WriteString(w, "again\n")
		}
	})
	var out bytes.Buffer
	j, err := New(rec.srv.URL).FollowLogs(context.Background(), "j1", LogsOptions{Follow: true}, WaitOptions{Retry: time.Minute}, &out)
	if err != nil || j.State != api.StateFailed {
		t.Fatalf("FollowLogs = %+v, %v; want the failed job", j, err)
	}
	if got, want := out.String(), "hello world\nagain\n"; got != want {
		t.Errorf("FollowLogs wrote %q, want %q", got, want)
	}
	if len(queries) != 3 {
		t.Fatalf("FollowLogs asked for logs %d times, want 3: %v", len(queries), queries)
	}
	for i, want := range []string{"", "0", "1"} {
		if got := queries[i].Get("attempt"); got != want || queries[i].Get("follow") != "true" {
			t.Errorf("logs request %d: attempt %q follow %q, want attempt %q, follow true", i+1, got, queries[i].Get("follow"), want)
		}
	}
}

// TestFollowLogsGivesUp: with no Retry a broken stream is an error.
func TestFollowLogsGivesUp(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, "x")
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	})
	_, err := New(rec.srv.URL).FollowLogs(context.Background(), "j1", LogsOptions{Follow: true}, WaitOptions{}, io.Discard)
	if err == nil || !Transient(err) {
		t.Errorf("FollowLogs of a broken stream without Retry = %v, want the break", err)
	}
}

// failingWriter fails every write, as a closed stdout does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestFollowLogsWriteErrorNotRetried: a failure to write the output (a
// closed pipe) ends the follow at once; it is not taken for a broken
// stream and retried.
func TestFollowLogsWriteErrorNotRetried(t *testing.T) {
	var calls atomic.Int32
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "out\n")
	})
	_, err := New(rec.srv.URL).FollowLogs(context.Background(), "j1", LogsOptions{Follow: true}, WaitOptions{Retry: time.Minute}, failingWriter{})
	if !errors.Is(err, syscall.EPIPE) || calls.Load() != 1 {
		t.Errorf("FollowLogs into a closed pipe = %v after %d requests, want EPIPE after 1", err, calls.Load())
	}
}

func TestSkipWriter(t *testing.T) {
	var out bytes.Buffer
	s := &skipWriter{w: &out, skip: 5}
	for _, p := range []string{"abc", "defg", "hij"} {
		if n, err := s.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if out.String() != "fghij" {
		t.Errorf("skipWriter passed on %q, want %q", out.String(), "fghij")
	}
}

func ptrInt(v int) *int { return &v }
