package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A store filled with ended jobs (corral bench fill) is served from the
// database: GET /jobs filters and pages through them newest first without
// repeating or missing one, GET /jobs/{id} reads an old job with its
// events, corral jobs --all follows the pages, GET /queue pages with
// complete totals, bad paging input is a 422 naming the field, and
// --keep-history prunes what ended before the kept time.
func TestHistoryPages(t *testing.T) {
	dir := t.TempDir()
	if out, errOut, code := runCLI(t, nil, "bench", "fill", "--data-dir", dir, "--finished", "3000", "--users", "3", "--days", "30"); code != 0 {
		t.Fatalf("bench fill: %s %s", out, errOut)
	}
	s := startServerAt(t, dir, freePort(t))

	// 1. Pages of one user's jobs: 1,000 of them, newest first, none twice.
	seen := map[string]bool{}
	cursor, pages, last := "", 0, "~"
	for {
		var l api.JobList
		s.mustJSON("GET", "/jobs?user=user1&limit=300&cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &l)
		for _, j := range l.Jobs {
			if j.User != "user1" || j.State != api.StateCompleted || seen[j.ID] || j.ID >= last {
				t.Fatalf("page %d: job %s of %s, %s (seen %v), after %s", pages, j.ID, j.User, j.State, seen[j.ID], last)
			}
			seen[j.ID], last = true, j.ID
		}
		pages++
		if l.NextCursor == "" || pages > 10 {
			break
		}
		cursor = l.NextCursor
	}
	if len(seen) != 1000 || pages != 4 {
		t.Fatalf("paged %d jobs in %d pages, want 1000 in 4", len(seen), pages)
	}

	// 2. An old job, read from the database with its events.
	old := s.job(last)
	if old.State != api.StateCompleted || len(old.Events) != 5 || old.FinishedAt == nil {
		t.Fatalf("old job %s: %s with %d events", old.ID, old.State, len(old.Events))
	}

	// 3. A new job runs, ends, and is listed first among the completed.
	j := s.submit(map[string]any{"command": "true", "gpu_count": 1, "name": "fresh"})
	s.waitState(j.ID, api.StateCompleted, 30*time.Second)
	var l api.JobList
	s.mustJSON("GET", "/jobs?state=completed&limit=1", nil, http.StatusOK, &l)
	if len(l.Jobs) != 1 || l.Jobs[0].ID != j.ID || l.NextCursor != j.ID {
		t.Fatalf("newest completed: %v next %q, want %s", l.Jobs, l.NextCursor, j.ID)
	}
	l = api.JobList{}
	s.mustJSON("GET", "/jobs?name=fresh&since=1h", nil, http.StatusOK, &l)
	if len(l.Jobs) != 1 || l.NextCursor != "" {
		t.Fatalf("name=fresh since 1h: %d jobs, next %q", len(l.Jobs), l.NextCursor)
	}
	until := url.QueryEscape(time.Now().Add(-20 * 24 * time.Hour).UTC().Format(time.RFC3339))
	l = api.JobList{}
	s.mustJSON("GET", "/jobs?user=user0&limit=1000&until="+until, nil, http.StatusOK, &l)
	if n := len(l.Jobs); n < 250 || n > 420 {
		t.Fatalf("user0's jobs submitted over 20 days ago: %d, want about a third of 1000", n)
	}

	// 4. corral jobs --all follows the pages.
	out, errOut, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "jobs", "--user", "user2", "--limit", "400", "--all", "-o", "json")
	var all api.JobList
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all.Jobs) != 1000 {
		t.Fatalf("corral jobs --all: code %d, %d jobs; stderr %s", code, len(all.Jobs), errOut)
	}
	out, _, _ = runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "jobs", "--user", "user2", "--limit", "5")
	if !strings.Contains(out, "--cursor ") {
		t.Fatalf("corral jobs --limit 5 does not say how to get the next page:\n%s", out)
	}

	// 5. GET /queue pages; its totals count every queued job.
	s.mustJSON("POST", "/orchestrator/stop", nil, http.StatusOK, nil)
	for i := range 3 {
		s.submit(map[string]any{"command": "true", "gpu_count": 1, "name": fmt.Sprintf("q%d", i)})
	}
	var q api.QueueResponse
	s.mustJSON("GET", "/queue?limit=2", nil, http.StatusOK, &q)
	if len(q.QueuedJobs) != 2 || q.NextCursor == "" || q.Statistics.TotalQueued != 3 {
		t.Fatalf("queue page 1: %d jobs, next %q, total %d", len(q.QueuedJobs), q.NextCursor, q.Statistics.TotalQueued)
	}
	first, next := q.QueuedJobs[0].ID, q.NextCursor
	q = api.QueueResponse{}
	s.mustJSON("GET", "/queue?limit=2&cursor="+next, nil, http.StatusOK, &q)
	if len(q.QueuedJobs) != 1 || q.NextCursor != "" || q.QueuedJobs[0].ID == first {
		t.Fatalf("queue page 2: %+v next %q", q.QueuedJobs, q.NextCursor)
	}

	// 6. Bad paging input: 422 naming the field.
	for path, field := range map[string]string{
		"/jobs?until=soon": "until", "/jobs?limit=0": "limit", "/queue?cursor=abc": "cursor", "/queue?limit=-1": "limit",
	} {
		r := s.do("GET", path, nil, nil)
		if r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != field {
			t.Errorf("GET %s: %s, want 422 naming %s", path, r, field)
		}
	}

	// 7. --keep-history 10d prunes the jobs that ended before (about two
	// thirds of them), in the background, from the start.
	s.stop()
	s = startControl(t, dir, freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--keep-history", "10d")
	var left api.JobList
	cutoff := time.Now().Add(-10*24*time.Hour - time.Minute)
	waitFor(t, 30*time.Second, func() string {
		return fmt.Sprintf("%d of user1's jobs left, the oldest ended %v", len(left.Jobs), left.Jobs[len(left.Jobs)-1].FinishedAt)
	}, func() bool {
		left = api.JobList{}
		s.mustJSON("GET", "/jobs?user=user1&limit=1000", nil, http.StatusOK, &left)
		return len(left.Jobs) > 0 && left.Jobs[len(left.Jobs)-1].FinishedAt.After(cutoff)
	})
	if n := len(left.Jobs); n < 250 || n > 400 {
		t.Fatalf("%d of user1's 1000 jobs left, want about a third (those that ended in the last 10 of 30 days)", n)
	}
	if r := s.do("GET", "/jobs/"+old.ID, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("the oldest job after pruning: %s, want 404", r)
	}
}
