package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// array submits a queued job array of alice in project nlp (through the
// orchestrator, so the matrix has a fresh one for each cell).
func (e *authEnv) array() string {
	e.t.Helper()
	j, _, err := e.o.Submit(context.Background(), api.SubmitRequest{User: "alice", Project: "nlp", Command: "true", GPUCount: intp(1), Array: "0-3%1"}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return j.ArrayJobID
}

// TestArrayRoutes: a submission with "array" answers 201 with its first
// task and the array's summary; GET /arrays/{id} (also by prefix) gives
// the counts; PATCH sets the throttle (422 naming throttle when bad);
// DELETE /queue/{array id} cancels every task and answers the array; a
// bad expression is a 422 naming array that queues nothing.
func TestArrayRoutes(t *testing.T) {
	e := newAuthEnv(t)
	resp, b := e.do("owner", "POST", "/queue/submit", `{"command":"true","gpu_count":1,"array":"1,5,9-12%2"}`, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	var ans api.SubmitAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		t.Fatal(err)
	}
	a := ans.ArraySummary
	if a == nil || ans.ID != a.ID+"_1" || ans.ArrayJobID != a.ID || a.TaskCount != 6 || a.TaskMin != 1 || a.TaskMax != 12 ||
		a.Throttle != 2 || a.Counts.Queued != 6 || a.Array != "1,5,9-12%2" {
		t.Fatalf("answer: %s", b)
	}
	if loc := resp.Header.Get("Location"); loc != "/arrays/"+a.ID {
		t.Fatalf("Location %q", loc)
	}

	resp, b = e.do("viewer", "GET", "/arrays/"+a.ID[:12], "", nil)
	var got api.Array
	if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.ID != a.ID || len(got.Tasks) != 6 || got.Tasks[1] != 5 {
		t.Fatalf("GET by prefix: %d %s", resp.StatusCode, b)
	}
	for _, bad := range []string{`{}`, `{"throttle":-1}`} {
		resp, b = e.do("owner", "PATCH", "/arrays/"+a.ID, bad, nil)
		var eb api.ErrorBody
		if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field != "throttle" {
			t.Fatalf("PATCH %s: %d %s; want 422 naming throttle", bad, resp.StatusCode, b)
		}
	}
	resp, b = e.do("owner", "PATCH", "/arrays/"+a.ID, `{"throttle":0}`, nil)
	if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.Throttle != 0 {
		t.Fatalf("PATCH throttle 0: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do("viewer", "GET", "/jobs/"+a.ID, "", nil)
	if resp.StatusCode != 404 {
		t.Fatalf("GET /jobs/{array id}: %d %s; want 404 (an array is not a job)", resp.StatusCode, b)
	}
	resp, b = e.do("owner", "DELETE", "/queue/"+a.ID, "", nil)
	if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.Counts.Canceled != 6 || got.State != api.StateCanceled {
		t.Fatalf("DELETE /queue/{array id}: %d %s", resp.StatusCode, b)
	}

	// An Idempotency-Key replays the whole array: same task, same array.
	var first, again api.SubmitAnswer
	key := map[string]string{"Idempotency-Key": "sweep-1"}
	resp, b = e.do("owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"array":"0-9"}`, key)
	if resp.StatusCode != 201 || json.Unmarshal(b, &first) != nil || first.ArraySummary == nil {
		t.Fatalf("keyed submit: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do("owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"array":"0-9"}`, key)
	if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" || json.Unmarshal(b, &again) != nil ||
		again.ID != first.ID || again.ArraySummary == nil || again.ArraySummary.ID != first.ArraySummary.ID {
		t.Fatalf("replay: %d %v %s", resp.StatusCode, resp.Header, b)
	}

	before := len(e.o.Jobs(orchestrator.JobFilter{}))
	resp, b = e.do("owner", "POST", "/queue/submit", `{"command":"true","array":"9-1"}`, nil)
	var eb api.ErrorBody
	if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field != "array" {
		t.Fatalf("reversed range: %d %s; want 422 naming array", resp.StatusCode, b)
	}
	if after := len(e.o.Jobs(orchestrator.JobFilter{})); after != before {
		t.Fatalf("a refused array queued %d jobs", after-before)
	}
}
