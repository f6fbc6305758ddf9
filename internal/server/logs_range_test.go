package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestLogRanges: a job's log is served with byte ranges: a suffix range
// of a 1 MB log answers 206 with only its tail and a Content-Range that
// gives the whole size; a middle range, those bytes; no range, the whole
// log; an unsatisfiable range, 416. A followed log starts at its offset,
// and says so in X-Corral-Log-Offset; offset without follow is a 422.
func TestLogRanges(t *testing.T) {
	ts, o := newServerWith(t, idleExec{}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	j, _, err := o.Submit(ctx, api.SubmitRequest{User: "alice", Command: "true", GPUCount: intp(1)}, "")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	for i := 0; log.Len() < 1<<20; i++ {
		log.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	path := o.LogPath(j.ID, 0)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	size := int64(log.Len())
	get := func(rng, query string) (*http.Response, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/jobs/"+j.ID+"/logs"+query, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	sz := strconv.FormatInt(size, 10)
	tests := []struct {
		name, rng    string
		status       int
		want         []byte
		contentRange string
	}{
		{"tail", "bytes=-65536", 206, log.Bytes()[size-65536:], "bytes " + strconv.FormatInt(size-65536, 10) + "-" + strconv.FormatInt(size-1, 10) + "/" + sz},
		{"middle", "bytes=100-199", 206, log.Bytes()[100:200], "bytes 100-199/" + sz},
		{"from", "bytes=" + strconv.FormatInt(size-10, 10) + "-", 206, log.Bytes()[size-10:], "bytes " + strconv.FormatInt(size-10, 10) + "-" + strconv.FormatInt(size-1, 10) + "/" + sz},
		{"whole", "", 200, log.Bytes(), ""},
		{"past the end", "bytes=" + sz + "-", 416, nil, "bytes */" + sz},
	}
	for _, tc := range tests {
		resp, b := get(tc.rng, "")
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Range") != tc.contentRange {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, resp.Header.Get("Content-Range"), tc.status, tc.contentRange)
			continue
		}
		if tc.want != nil && !bytes.Equal(b, tc.want) {
			t.Errorf("%s: %d bytes, want %d", tc.name, len(b), len(tc.want))
		}
		if ct := resp.Header.Get("Content-Type"); tc.status < 300 && ct != "text/plain; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
	}
	// A followed log from an offset: the job is queued, so cancel it and
	// the stream drains what is there and ends.
	if _, _, err := o.Cancel(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	resp, b := get("", "?follow=true&offset="+strconv.FormatInt(size-7, 10))
	if resp.StatusCode != 200 || resp.Header.Get("X-Corral-Log-Offset") != strconv.FormatInt(size-7, 10) || !bytes.Equal(b, log.Bytes()[size-7:]) {
		t.Errorf("follow from an offset: %d %q %q", resp.StatusCode, resp.Header.Get("X-Corral-Log-Offset"), b)
	}
	for _, q := range []string{"?offset=5", "?follow=true&offset=-1", "?follow=true&offset=x"} {
		if resp, b := get("", q); resp.StatusCode != 422 {
			t.Errorf("%s: %d %s, want 422", q, resp.StatusCode, b)
		}
	}
}

// TestLogRangeEmpty: a log not written yet, or empty, is an empty 200
// whatever the range.
func TestLogRangeEmpty(t *testing.T) {
	ts, o := newServerWith(t, idleExec{}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	j, _, err := o.Submit(ctx, api.SubmitRequest{User: "alice", Command: "true", GPUCount: intp(1)}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, create := range []bool{false, true} {
		if create {
			path := o.LogPath(j.ID, 0)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		req, _ := http.NewRequest("GET", ts.URL+"/jobs/"+j.ID+"/logs", nil)
		req.Header.Set("Range", "bytes=-65536")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) != 0 {
			t.Errorf("file %v: %d %q", create, resp.StatusCode, b)
		}
	}
}
