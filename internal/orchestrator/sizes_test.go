package orchestrator

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
)

// TestJobSizeLimits: a command or env past its byte limit is a 422 naming
// the field, and one user's jobs that have not ended may hold at most
// MaxUserQueuedBytes (429 user_bytes_full; admins exempt); a job that
// ends, or is canceled, gives its bytes back, and a restart counts them
// again. Before, a job's env could total 8 MB (256 values of 32 KB) and
// nothing bounded a user's bytes (400 jobs of 1 MB each once).
func TestJobSizeLimits(t *testing.T) {
	env := func(n int) map[string]string { return map[string]string{"X": strings.Repeat("e", n-1)} }
	limits := Limits{MaxCommandBytes: 100, MaxEnvBytes: 1000, MaxUserQueuedBytes: 3000}
	type sub struct {
		req    api.SubmitRequest
		exempt bool
		status int    // 0: accepted
		field  string // of a 422
	}
	for name, c := range map[string][]sub{
		"command": {
			{req: api.SubmitRequest{Command: strings.Repeat("c", 100)}},
			{req: api.SubmitRequest{Command: strings.Repeat("c", 101)}, status: 422, field: "command"},
		},
		"env": {
			{req: api.SubmitRequest{Command: "c", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", Env: env(1001)}, status: 422, field: "env"},
			{req: api.SubmitRequest{Command: "c", Env: map[string]string{"A": strings.Repeat("a", 600), "B": strings.Repeat("b", 600)}}, status: 422, field: "env"},
		},
		"per user": {
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}, status: 429},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}, exempt: true},
			{req: api.SubmitRequest{Command: "c", User: "v", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000), Array: "0-99"}, status: 429},
		},
		"arrays count once": {
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000), Array: "0-99"}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000), Array: "0-99"}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}, status: 429},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Limits: limits})
			h.o.SetScheduling(context.Background(), false)
			for i, s := range c {
				s.req.GPUCount = gpus(1)
				_, _, err := h.o.SubmitWith(context.Background(), s.req, SubmitOptions{Exempt: s.exempt})
				var e *api.Error
				switch {
				case s.status == 0 && err != nil:
					t.Errorf("submission %d: %v", i, err)
				case s.status != 0 && (!errors.As(err, &e) || e.Status != s.status || e.Field != s.field):
					t.Errorf("submission %d: %v, want %d on %q", i, err, s.status, s.field)
				}
			}
		})
	}
}

// TestUserBytesGivenBack: a user's bytes come back when a job is canceled
// and are counted again after a restart.
func TestUserBytesGivenBack(t *testing.T) {
	path := t.TempDir() + "/corral.db"
	cfg := Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Limits: Limits{MaxUserQueuedBytes: 2500}}
	h := startConfig(t, path, cfg)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	req := api.SubmitRequest{Command: "c", User: "u", GPUCount: gpus(1), Env: map[string]string{"X": strings.Repeat("e", 1000)}}
	a := h.submit(req)
	h.submit(req)
	var e *api.Error
	if _, _, err := h.o.Submit(ctx, req, ""); !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code != "user_bytes_full" {
		t.Fatalf("third submission: %v, want 429 user_bytes_full", err)
	}
	if _, _, err := h.o.Cancel(ctx, a.ID, 0); err != nil {
		t.Fatal(err)
	}
	h.submit(req) // the canceled job's bytes came back
	h.stop()
	h.stop = nil
	h = startConfig(t, path, cfg)
	if _, _, err := h.o.Submit(ctx, req, ""); !errors.As(err, &e) || e.Code != "user_bytes_full" {
		t.Fatalf("after a restart: %v, want 429 user_bytes_full", err)
	}
}

// TestPagesBoundedByBytes: GET /jobs stops a page at about PageBytes of
// JSON and gives the next cursor, from memory and from the store alike;
// paging on lists every job once. It used to list up to the count limit
// whatever the size (396 MB of JSON per listing once).
func TestPagesBoundedByBytes(t *testing.T) {
	path := t.TempDir() + "/corral.db"
	cfg := Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Limits: Limits{MaxUserQueuedBytes: -1}}
	h := startConfig(t, path, cfg)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	big := map[string]string{}
	for i := range 8 {
		big["X"+strconv.Itoa(i)] = strings.Repeat("e", 31<<10)
	}
	const n = 80
	var ids []string
	for i := range n {
		j := h.submit(api.SubmitRequest{Command: "c", User: "u", GPUCount: gpus(1), Env: big})
		ids = append(ids, j.ID)
		if i%2 == 0 {
			if _, _, err := h.o.Cancel(ctx, j.ID, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.stop()
	h.stop = nil
	h = startConfig(t, path, cfg) // the canceled half in the store only
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		jobs, next, err := h.o.JobPage(ctx, JobFilter{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		size := int64(0)
		for i := range jobs {
			seen[jobs[i].ID]++
			size += readview.JobBytes(&jobs[i])
		}
		if size > PageBytes+readview.JobBytes(&jobs[0]) {
			t.Errorf("page %d: %d jobs of about %d bytes, more than %d", pages, len(jobs), size, PageBytes)
		}
		if next == "" || pages > n {
			break
		}
		cursor = next
	}
	if pages < 3 {
		t.Errorf("%d pages of %d jobs of 250 KB: want them cut by bytes", pages, n)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("job %s listed %d times", id, seen[id])
		}
	}
}

// TestQueuePageBoundedByBytes: a page of GET /queue stops at about
// PageBytes too.
func TestQueuePageBoundedByBytes(t *testing.T) {
	rows := make([]api.QueuedJob, 20000)
	for i := range rows {
		rows[i] = api.QueuedJob{ID: "j" + strconv.Itoa(i), PendingMessage: strings.Repeat("m", 400)}
	}
	p := readview.PageQueue(api.QueueResponse{QueuedJobs: rows}, 0, 100000, time.Now())
	if len(p.QueuedJobs) >= len(rows) || p.NextCursor != strconv.Itoa(len(p.QueuedJobs)) {
		t.Fatalf("%d rows, next cursor %q: want a page cut by bytes", len(p.QueuedJobs), p.NextCursor)
	}
	total := len(p.QueuedJobs)
	for p.NextCursor != "" {
		after, _ := strconv.Atoi(p.NextCursor)
		if p = readview.PageQueue(api.QueueResponse{QueuedJobs: rows}, after, 100000, time.Now()); len(p.QueuedJobs) == 0 {
			t.Fatal("an empty page")
		}
		total += len(p.QueuedJobs)
	}
	if total != len(rows) {
		t.Fatalf("pages held %d rows, want %d", total, len(rows))
	}
}

// TestRecentRingKeepsLargeJobsSlim: a large job that ended is kept in the
// ring of recently ended jobs without its command and env (4,096 of them
// at the limits would hold 1.3 GB), and its view, read from the store,
// is whole.
func TestRecentRingKeepsLargeJobsSlim(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	big := strings.Repeat("c", 10<<10)
	for name, c := range map[string]struct {
		cmd  string
		slim bool
	}{"small": {"true", false}, "large": {big, true}} {
		t.Run(name, func(t *testing.T) {
			j := h.submit(api.SubmitRequest{Command: c.cmd, GPUCount: gpus(1), Env: map[string]string{"K": "v"}})
			if _, _, err := h.o.Cancel(ctx, j.ID, 0); err != nil {
				t.Fatal(err)
			}
			h.o.mu.RLock()
			kept, inRing := h.o.gone.Get(j.ID)
			live := h.o.jobs.Get(j.ID) != nil
			h.o.mu.RUnlock()
			if !inRing || live {
				t.Fatalf("in the ring %v, in o.jobs %v", inRing, live)
			}
			if got := kept.Command == ""; got != c.slim {
				t.Errorf("kept without its command: %v, want %v", got, c.slim)
			}
			v, err := h.o.Job(j.ID)
			if err != nil || v.Command != c.cmd || v.Env["K"] != "v" || v.State != api.StateCanceled || len(v.Events) == 0 {
				t.Errorf("view: %d-byte command, env %v, %s, %d events, %v", len(v.Command), v.Env, v.State, len(v.Events), err)
			}
		})
	}
}
