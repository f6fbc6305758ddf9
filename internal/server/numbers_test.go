package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestRoutesTakeNumbersAndNames: wherever a route takes a job's or an
// array's id it takes its number (1234), a task's (1234_7), and a name
// that names exactly one of the caller's jobs; another user's job of that
// name is not the caller's; a name the caller gave several jobs is a 409
// ambiguous_id listing their numbers. Who may act is checked as for the
// id itself.
func TestRoutesTakeNumbersAndNames(t *testing.T) {
	e := newAuthEnv(t)
	sub := func(user, name, array string) api.Job {
		j, _, err := e.o.Submit(context.Background(), api.SubmitRequest{User: user, Project: "nlp", Name: name, Command: "true", GPUCount: intp(1), Array: array}, "")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	eval := sub("alice", "eval", "")    // 1
	bobs := sub("bob", "eval", "")      // 2
	sub("alice", "twice", "")           // 3
	sub("alice", "twice", "")           // 4
	arr := sub("alice", "sweep", "0-2") // 5
	solo := sub("bob", "solo", "")      // 6
	if eval.Number != 1 || arr.Number != 5 || solo.Number != 6 {
		t.Fatalf("numbers %d, %d, %d; want 1, 5, 6", eval.Number, arr.Number, solo.Number)
	}
	for _, c := range []struct {
		caller, method, path string
		status               int
		want                 string // the id answered
		msg                  string
	}{
		{"owner", "GET", "/jobs/1", 200, eval.ID, ""},
		{"other", "GET", "/jobs/1", 200, eval.ID, ""}, // anyone's number reads
		{"owner", "GET", "/jobs/5_2", 200, arr.ArrayJobID + "_2", ""},
		{"owner", "GET", "/jobs/" + arr.ArrayJobID[:9] + "_1", 200, arr.ArrayJobID + "_1", ""},
		{"owner", "GET", "/jobs/5", 404, "", "is a job array"},
		{"owner", "GET", "/arrays/5", 200, arr.ArrayJobID, ""},
		{"owner", "GET", "/arrays/sweep", 200, arr.ArrayJobID, ""},
		{"owner", "GET", "/arrays/1", 404, "", ""},
		{"owner", "GET", "/jobs/eval", 200, eval.ID, ""},
		{"other", "GET", "/jobs/eval", 200, bobs.ID, ""},
		{"owner", "GET", "/jobs/solo", 404, "", ""}, // bob's
		{"owner", "GET", "/jobs/twice", 409, "", "names 2 of your jobs: 4, 3"},
		{"owner", "GET", "/jobs/99", 404, "", "no job number 99"},
		{"owner", "GET", "/jobs/1/logs", 200, "", ""},
		{"owner", "PATCH", "/queue/eval/priority", 200, eval.ID, ""},
		{"other", "DELETE", "/queue/1", 403, "", "not_owner"},
		{"owner", "DELETE", "/queue/5", 200, arr.ArrayJobID, ""}, // the array, as by its id
		{"owner", "DELETE", "/queue/eval", 200, eval.ID, ""},
	} {
		body := ""
		if c.method == "PATCH" {
			body = `{"priority":"high"}`
		}
		resp, b := e.do(c.caller, c.method, c.path, body, nil)
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s %s as %s: %d %s; want %d saying %q", c.method, c.path, c.caller, resp.StatusCode, b, c.status, c.msg)
			continue
		}
		if c.want != "" {
			var got struct {
				ID     string `json:"id"`
				Number int64  `json:"number"`
			}
			if json.Unmarshal(b, &got) != nil || got.ID != c.want || got.Number == 0 {
				t.Errorf("%s %s as %s: %s; want %s, with its number", c.method, c.path, c.caller, b, c.want)
			}
		}
		if c.status == 409 && !strings.Contains(string(b), "ambiguous_id") {
			t.Errorf("%s %s: %s; want code ambiguous_id", c.method, c.path, b)
		}
	}
}

// TestCompleteJobs: GET /complete/jobs lists the caller's unfinished jobs
// and arrays (an array once), newest first, with numbers and names;
// nobody else's, nothing ended.
func TestCompleteJobs(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	sub := func(user, name, array string) api.Job {
		j, _, err := e.o.Submit(ctx, api.SubmitRequest{User: user, Project: "nlp", Name: name, Command: "true", GPUCount: intp(1), Array: array}, "")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a := sub("alice", "train", "")
	sub("bob", "theirs", "")
	arr := sub("alice", "sweep", "0-9")
	ended := sub("alice", "gone", "")
	if _, _, err := e.o.Cancel(ctx, ended.ID, 0); err != nil {
		t.Fatal(err)
	}
	resp, b := e.do("owner", "GET", "/complete/jobs", "", nil)
	var l api.JobRefList
	if resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("GET /complete/jobs: %d %s", resp.StatusCode, b)
	}
	want := []api.JobRef{
		{Number: arr.Number, ID: arr.ArrayJobID, Name: "sweep", State: api.StateQueued, Array: true},
		{Number: a.Number, ID: a.ID, Name: "train", State: api.StateQueued},
	}
	if fmt.Sprint(l.Jobs) != fmt.Sprint(want) {
		t.Errorf("GET /complete/jobs = %+v; want %+v", l.Jobs, want)
	}
}
