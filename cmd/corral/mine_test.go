package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestMineByDefault: corral jobs and corral queue ask for a user's own
// jobs (mine=auto: everyone's for admins) unless -A or --user says whose; corral queue asks for
// the started jobs too, and --state narrows which it asks for.
func TestMineByDefault(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/queue", 200, sampleQueue())
	f.on("GET", "/jobs", 200, api.JobList{})
	started := []string{"/jobs?state=scheduled", "/jobs?state=allocating", "/jobs?state=running"}
	tests := []struct {
		args []string
		want []string // each request, as path?query with mine and user (sorted keys)
	}{
		{[]string{"jobs"}, []string{"/jobs?mine=auto"}},
		{[]string{"jobs", "--name", "eval"}, []string{"/jobs?mine=auto"}},
		{[]string{"jobs", "-A"}, []string{"/jobs?"}},
		{[]string{"jobs", "--all-users", "--name", "eval"}, []string{"/jobs?"}},
		{[]string{"jobs", "--user", "bo"}, []string{"/jobs?user=bo"}},
		{[]string{"queue"}, append([]string{"/queue?mine=auto"}, mineQ(started)...)},
		{[]string{"queue", "-A"}, append([]string{"/queue?"}, started...)},
		{[]string{"queue", "--user", "bo"}, append([]string{"/queue?user=bo"}, userQ(started, "bo")...)},
		{[]string{"queue", "--state", "queued"}, []string{"/queue?mine=auto"}},
		{[]string{"queue", "--state", "running,queued", "-A"}, []string{"/queue?", "/jobs?state=running"}},
	}
	for _, tc := range tests {
		n := len(f.requests())
		res := f.run(tc.args...)
		if res.code != 0 {
			t.Errorf("%v: exit %d: %s", tc.args, res.code, res.stderr)
			continue
		}
		var got []string
		for _, r := range f.requests()[n:] {
			q, _ := url.ParseQuery(r.Query)
			keep := url.Values{}
			for _, k := range []string{"mine", "user", "state"} {
				if v := q.Get(k); v != "" {
					keep.Set(k, v)
				}
			}
			got = append(got, r.Path+"?"+keep.Encode())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: asked %v, want %v", tc.args, got, tc.want)
		}
	}
	if res := f.run("queue", "--state", "done"); res.code != 2 || !strings.Contains(res.stderr, "--state") {
		t.Errorf("--state done: exit %d, %q", res.code, res.stderr)
	}
}

func mineQ(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.Replace(p, "?", "?mine=auto&", 1)
	}
	return out
}

func userQ(paths []string, user string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p + "&user=" + user
	}
	return out
}

// TestQueueShowsStarted: corral queue lists the caller's started jobs
// above the queue, and -o json carries them as running_jobs beside GET
// /queue's fields.
func TestQueueShowsStarted(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/queue", 200, sampleQueue())
	run := sampleJob()
	run.ID, run.State, run.FinishedAt, run.ExitCode = "01JRUNNING", api.StateRunning, nil, nil
	f.on("GET", "/jobs", 200, api.JobList{Jobs: []api.Job{run, sampleJob()}}) // the completed one is not asked for
	res := f.run("queue")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	lines := strings.Split(res.stdout, "\n")
	if !strings.HasPrefix(lines[0], "NUM  ID") || !strings.Contains(lines[0], "STATE") || !strings.Contains(lines[1], "01JRUNNING") ||
		!strings.Contains(lines[1], "running") || !strings.Contains(lines[1], "node-a") || strings.Count(res.stdout, "01JRUNNING") != 1 ||
		!strings.Contains(res.stdout, "POS") || !strings.Contains(res.stdout, "01JQUEUED1") {
		t.Errorf("queue:\n%s", res.stdout)
	}
	res = f.run("-o", "json", "queue")
	var out struct {
		api.QueueResponse
		Running []api.Job `json:"running_jobs"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || len(out.Running) != 1 || len(out.QueuedJobs) != 2 {
		t.Errorf("queue -o json: %v\n%s", err, res.stdout)
	}
}

// TestCancelFilterMine: a filter cancels the caller's own jobs (mine=true);
// with -A it takes the jobs of others that match only where the caller may
// act on them (GET /auth/whoami), so ana's corral cancel -A --name eval
// leaves bo's eval alone, says so, and exits 0.
func TestCancelFilterMine(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/auth/whoami", 200, api.Whoami{User: "ana", Role: api.RoleUser, ProjectAdmin: []string{"vision"}})
	jobs := []api.Job{
		{ID: "01JANA", Name: "eval", User: "ana", Project: "nlp", State: api.StateQueued, Priority: api.PriorityNormal},
		{ID: "01JBO", Name: "eval", User: "bo", Project: "nlp", State: api.StateQueued, Priority: api.PriorityNormal},
		{ID: "01JBOVIS", Name: "eval", User: "bo", Project: "vision", State: api.StateQueued, Priority: api.PriorityNormal},
	}
	f.on("GET", "/jobs", 200, api.JobList{Jobs: jobs})
	for _, j := range jobs {
		f.on("DELETE", "/queue/"+j.ID, 200, api.Job{ID: j.ID, State: api.StateCanceled, Priority: api.PriorityNormal})
	}
	res := f.run("cancel", "--name", "eval")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, r := range f.requests() {
		if r.Path == "/jobs" && !strings.Contains(r.Query, "mine=true") {
			t.Errorf("GET /jobs?%s: not mine=true", r.Query)
		}
		if r.Path == "/auth/whoami" {
			t.Errorf("asked who the caller is without -A")
		}
	}
	n := len(f.requests())
	res = f.run("cancel", "-A", "--name", "eval")
	if res.code != 0 || !strings.Contains(res.stderr, "1 matching jobs of others are left out") {
		t.Fatalf("-A: exit %d, %q", res.code, res.stderr)
	}
	var deleted []string
	for _, r := range f.requests()[n:] {
		if r.Method == "DELETE" {
			deleted = append(deleted, strings.TrimPrefix(r.Path, "/queue/"))
		}
	}
	if !slices.Equal(deleted, []string{"01JANA", "01JBOVIS"}) {
		t.Errorf("-A canceled %v, want ana's and the one of the project she administers", deleted)
	}
}

// logServer serves one job's log as the server does (ranges by
// http.ServeContent; follow=true&offset=N from byte N, then more), counting
// the bytes of log it sent.
type logServer struct {
	log   []byte
	more  string // what a follow sends after the log
	sent  atomic.Int64
	asked []string // Range headers and follow offsets, in order
}

func (ls *logServer) start(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs/J1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.Job{ID: "J1", State: api.StateCompleted, ExitCode: &exit0, Priority: api.PriorityNormal})
	})
	mux.HandleFunc("GET /jobs/J1/logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Corral-Attempt", "0")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.URL.Query().Get("follow") == "true" {
			off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
			ls.asked = append(ls.asked, fmt.Sprintf("follow@%d", off))
			w.Header().Set("X-Corral-Log-Offset", strconv.FormatInt(off, 10))
			b := append(append([]byte{}, ls.log[off:]...), ls.more...)
			ls.sent.Add(int64(len(b)))
			_, _ = w.Write(b)
			return
		}
		ls.asked = append(ls.asked, r.Header.Get("Range"))
		cw := &countWriter{ResponseWriter: w, n: &ls.sent}
		http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(ls.log))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

// TestLogsTail: corral logs --tail 5 of a 100,000-line log prints its last
// 5 lines, reading a few KB by ranges from the end, not the whole log; -f
// with --tail follows from where the tail ended; --tail 0 -f prints only
// what comes after.
func TestLogsTail(t *testing.T) {
	newFakeServer(t) // no ambient configuration
	var log bytes.Buffer
	for i := range 100000 {
		fmt.Fprintf(&log, "line %d\n", i)
	}
	ls := &logServer{log: log.Bytes(), more: "after\n"}
	srv := ls.start(t)
	want := "line 99995\nline 99996\nline 99997\nline 99998\nline 99999\n"
	res := runArgs("--server", srv.URL, "logs", "J1", "--tail", "5")
	if res.code != 0 || res.stdout != want {
		t.Fatalf("--tail 5: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if n := ls.sent.Load(); n > 64<<10 {
		t.Errorf("--tail 5 read %d bytes of a %d-byte log", n, log.Len())
	}
	ls.asked = nil
	res = runArgs("--server", srv.URL, "logs", "J1", "--tail", "5", "-f")
	if res.code != 0 || res.stdout != want+"after\n" {
		t.Fatalf("--tail 5 -f: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if len(ls.asked) != 2 || ls.asked[1] != fmt.Sprintf("follow@%d", log.Len()) {
		t.Errorf("--tail 5 -f asked %v", ls.asked)
	}
	res = runArgs("--server", srv.URL, "logs", "J1", "--tail", "0", "-f")
	if res.code != 0 || res.stdout != "after\n" {
		t.Fatalf("--tail 0 -f: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	// More lines than one chunk holds: the reads go back further.
	res = runArgs("--server", srv.URL, "logs", "J1", "--tail", "3000")
	if lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n"); res.code != 0 || len(lines) != 3000 || lines[0] != "line 97000" {
		t.Errorf("--tail 3000: exit %d, %d lines from %q", res.code, len(lines), lines[0])
	}
	if res := runArgs("--server", srv.URL, "logs", "J1", "--tail", "-1"); res.code != 2 {
		t.Errorf("--tail -1: exit %d", res.code)
	}
}

// TestLogsSince: --since keeps the lines stamped at or after the time
// (unstamped lines go with the line before); a log without times is an
// error that suggests --tail.
func TestLogsSince(t *testing.T) {
	newFakeServer(t)
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var log bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&log, "%s step %d\n", base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i)
		if i == 1999 {
			log.WriteString("Traceback: unstamped\n")
		}
	}
	ls := &logServer{log: log.Bytes()}
	srv := ls.start(t)
	res := runArgs("--server", srv.URL, "logs", "J1", "--since", base.Add(1997*time.Second).Format(time.RFC3339))
	want := fmt.Sprintf("%s step 1997\n%s step 1998\n%s step 1999\nTraceback: unstamped\n",
		base.Add(1997*time.Second).Format(time.RFC3339), base.Add(1998*time.Second).Format(time.RFC3339), base.Add(1999*time.Second).Format(time.RFC3339))
	if res.code != 0 || res.stdout != want {
		t.Errorf("--since: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if n := ls.sent.Load(); n >= int64(log.Len()) {
		t.Errorf("--since read the whole log (%d bytes)", n)
	}
	plain := &logServer{log: []byte("no\ntimes\nhere\n")}
	res = runArgs("--server", plain.start(t).URL, "logs", "J1", "--since", "1h")
	if res.code == 0 || !strings.Contains(res.stderr, "--tail") {
		t.Errorf("--since without times: exit %d, %q", res.code, res.stderr)
	}
}

// TestCollapseStarted: a started array task has no row of its own when
// its array has a row in the queue; otherwise an array's started tasks
// are one row; --expand keeps every task.
func TestCollapseStarted(t *testing.T) {
	task := func(id string, i int) api.Job {
		return api.Job{ID: id + "_" + strconv.Itoa(i), ArrayJobID: id, ArrayTaskID: &i, GPUCount: 1, State: api.StateRunning}
	}
	jobs := []api.Job{{ID: "plain", State: api.StateRunning}, task("arrq", 0), task("arrq", 1), task("arrr", 0), task("arrr", 1)}
	queued := []api.QueuedJob{{ID: "arrq", ArrayJobID: "arrq"}}
	for _, tc := range []struct {
		expand bool
		ids    []string
	}{
		{false, []string{"plain", "arrr"}},
		{true, []string{"plain", "arrq_0", "arrq_1", "arrr_0", "arrr_1"}},
	} {
		var ids []string
		out := collapseStarted(jobs, queued, tc.expand)
		for _, j := range out {
			ids = append(ids, j.ID)
		}
		if !slices.Equal(ids, tc.ids) {
			t.Errorf("expand %v: rows %v, want %v", tc.expand, ids, tc.ids)
		}
		if !tc.expand && out[1].GPUCount != 2 {
			t.Errorf("the array's row counts %d GPUs, want 2", out[1].GPUCount)
		}
	}
}
