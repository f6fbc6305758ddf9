package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestMineFilter: GET /jobs and GET /queue with mine=true list the
// caller's own jobs, whoever the caller is; mine=auto a user's own and
// everyone's to admins and viewers; user= lists that user's;
// neither lists everyone's; mine=true with another user= is a 422 that
// names mine.
func TestMineFilter(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	for _, u := range []string{"alice", "alice", "bob"} {
		if _, _, err := e.o.Submit(ctx, api.SubmitRequest{User: u, Command: "true", GPUCount: intp(1)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	owners := func(caller, path string) []string {
		t.Helper()
		resp, b := e.do(caller, "GET", path, "", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", caller, path, resp.StatusCode, b)
		}
		var out []string
		if strings.HasPrefix(path, "/queue") {
			var q api.QueueResponse
			if err := json.Unmarshal(b, &q); err != nil {
				t.Fatal(err)
			}
			for _, j := range q.QueuedJobs {
				out = append(out, j.User)
			}
			return out
		}
		var l api.JobList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Jobs {
			out = append(out, j.User)
		}
		return out
	}
	for _, base := range []string{"/jobs", "/queue"} {
		tests := []struct {
			caller, query string
			want          map[string]int
		}{
			{"owner", "?mine=true", map[string]int{"alice": 2}},
			{"other", "?mine=true", map[string]int{"bob": 1}},
			{"viewer", "?mine=true", map[string]int{}},
			{"admin", "?mine=1", map[string]int{}},
			{"owner", "?mine=true&user=alice", map[string]int{"alice": 2}},
			{"owner", "?mine=auto", map[string]int{"alice": 2}},
			{"other", "?mine=auto", map[string]int{"bob": 1}},
			{"admin", "?mine=auto", map[string]int{"alice": 2, "bob": 1}},
			{"viewer", "?mine=auto", map[string]int{"alice": 2, "bob": 1}},
			{"owner", "?user=bob", map[string]int{"bob": 1}},
			{"owner", "", map[string]int{"alice": 2, "bob": 1}},
			{"owner", "?mine=false", map[string]int{"alice": 2, "bob": 1}},
		}
		for _, tc := range tests {
			got := map[string]int{}
			for _, u := range owners(tc.caller, base+tc.query) {
				got[u]++
			}
			if len(got) != len(tc.want) || got["alice"] != tc.want["alice"] || got["bob"] != tc.want["bob"] {
				t.Errorf("%s %s%s: owners %v, want %v", tc.caller, base, tc.query, got, tc.want)
			}
		}
		for _, q := range []string{"?mine=true&user=bob", "?mine=maybe", "?mine=auto&user=alice"} {
			resp, b := e.do("owner", "GET", base+q, "", nil)
			var eb api.ErrorBody
			_ = json.Unmarshal(b, &eb)
			if resp.StatusCode != 422 || eb.Error.Field != "mine" {
				t.Errorf("%s%s: %d %s, want 422 naming mine", base, q, resp.StatusCode, b)
			}
		}
	}
	// The positions of the caller's rows are their places in the whole
	// queue.
	var all, mine api.QueueResponse
	_, b := e.do("other", "GET", "/queue", "", nil)
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	_, b = e.do("other", "GET", "/queue?mine=true", "", nil)
	if err := json.Unmarshal(b, &mine); err != nil || len(mine.QueuedJobs) != 1 || mine.Statistics.TotalQueued != 3 {
		t.Fatalf("bob's queue: %s", b)
	}
	for _, q := range all.QueuedJobs {
		if q.User == "bob" && q.QueuePosition != mine.QueuedJobs[0].QueuePosition {
			t.Errorf("bob's job is at %d of the queue, at %d of his", q.QueuePosition, mine.QueuedJobs[0].QueuePosition)
		}
	}
}
