package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// shortestUnique is the shortest prefix of ids[i], at least min long,
// that no other id starts with.
func shortestUnique(ids []string, i, min int) string {
	for n := min; n < len(ids[i]); n++ {
		p, shared := ids[i][:n], false
		for k, o := range ids {
			shared = shared || (k != i && strings.HasPrefix(o, p))
		}
		if !shared {
			return p
		}
	}
	return ids[i]
}

// TestJobRoutesTakeIDPrefix: GET /jobs/{id}, its logs, PATCH priority and
// DELETE /queue/{id} take a unique prefix of 6 or more characters for the
// id; an ambiguous one is a 409 ambiguous_id on job_id, a shorter one a
// 404. GET /jobs?name= lists only the jobs of that name.
func TestJobRoutesTakeIDPrefix(t *testing.T) {
	ts := newTestServer(t)
	var ids []string
	for _, name := range []string{"sweep", "other", "sweep"} {
		resp, b := call(t, ts, "POST", "/queue/submit", `{"command":"sleep 100","name":"`+name+`"}`)
		var j api.Job
		if resp.StatusCode != 201 || json.Unmarshal(b, &j) != nil {
			t.Fatalf("submit: %d %s", resp.StatusCode, b)
		}
		ids = append(ids, j.ID)
	}

	resp, b := call(t, ts, "GET", "/jobs?name=sweep", "")
	var list api.JobList
	if resp.StatusCode != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("GET /jobs?name=sweep: %d %s", resp.StatusCode, b)
	}
	if len(list.Jobs) != 2 || list.Jobs[0].ID != ids[2] || list.Jobs[1].ID != ids[0] {
		t.Errorf("GET /jobs?name=sweep: %s; want %s and %s", b, ids[2], ids[0])
	}

	p := shortestUnique(ids, 1, 6)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/jobs/" + p, ""},
		{"GET", "/jobs/" + p + "/logs", ""},
		{"PATCH", "/queue/" + p + "/priority", `{"priority":"high"}`},
		{"DELETE", "/queue/" + p, ""},
	} {
		resp, b := call(t, ts, r.method, r.path, r.body)
		if resp.StatusCode >= 300 {
			t.Errorf("%s %s: %d %s", r.method, r.path, resp.StatusCode, b)
			continue
		}
		if r.path == "/jobs/"+p+"/logs" {
			continue
		}
		var j api.Job
		if json.Unmarshal(b, &j) != nil || j.ID != ids[1] {
			t.Errorf("%s %s: %s; want job %s", r.method, r.path, b, ids[1])
		}
	}

	common := ids[0][:6] // ids start with the time: three made together share 6 characters
	for _, path := range []string{"/jobs/" + common, "/jobs/" + common + "/logs", "/queue/" + common} {
		method := "GET"
		if strings.HasPrefix(path, "/queue/") {
			method = "DELETE"
		}
		resp, b := call(t, ts, method, path, "")
		var eb api.ErrorBody
		if resp.StatusCode != 409 || json.Unmarshal(b, &eb) != nil || eb.Error.Code != "ambiguous_id" || eb.Error.Field != "job_id" {
			t.Errorf("%s %s: %d %s; want 409 ambiguous_id", method, path, resp.StatusCode, b)
		}
	}
	if resp, b := call(t, ts, "GET", "/jobs/"+ids[0][:5], ""); resp.StatusCode != 404 {
		t.Errorf("a 5-character prefix: %d %s; want 404", resp.StatusCode, b)
	}
	resp, b = call(t, ts, "GET", "/jobs/"+ids[0], "")
	var j api.Job
	if resp.StatusCode != 200 || json.Unmarshal(b, &j) != nil || j.ID != ids[0] {
		t.Errorf("the full id: %d %s", resp.StatusCode, b)
	}
}

// TestIDPrefixKeepsAuthzAndAudit: a job named by a prefix is authorized as
// the job itself (another user is refused not_owner, its owner may cancel)
// and audited under its full id.
func TestIDPrefixKeepsAuthzAndAudit(t *testing.T) {
	e := newAuthEnv(t)
	id := e.job()
	p := id[:len(id)-1]
	if resp, b := e.do("other", "DELETE", "/queue/"+p, "", nil); resp.StatusCode != 403 || !strings.Contains(string(b), "not_owner") {
		t.Errorf("another user's cancel by prefix: %d %s; want 403 not_owner", resp.StatusCode, b)
	}
	if resp, b := e.do("owner", "DELETE", "/queue/"+p, "", nil); resp.StatusCode != 200 {
		t.Errorf("the owner's cancel by prefix: %d %s", resp.StatusCode, b)
	}
	entries, err := e.a.Audit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range entries {
		if en.Action == "job.cancel" {
			n++
			if en.Target != id {
				t.Errorf("cancel by prefix audited with target %q, want %q", en.Target, id)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d cancels audited, want 2", n)
	}
}
