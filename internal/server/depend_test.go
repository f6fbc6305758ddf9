package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestDependencyRoute: POST /queue/submit and PATCH
// /queue/{id}/dependency refuse bad expressions with 422 naming
// depends_on; the route takes an id prefix, replaces and removes a
// queued job's dependencies, and refuses a missing field, an unknown one,
// and a job that is no longer queued.
func TestDependencyRoute(t *testing.T) {
	ts := newTestServer(t)
	submit := func(body string) api.Job {
		t.Helper()
		resp, b := call(t, ts, "POST", "/queue/submit", body)
		var j api.Job
		if resp.StatusCode != 201 || json.Unmarshal(b, &j) != nil {
			t.Fatalf("submit %s: %d %s", body, resp.StatusCode, b)
		}
		return j
	}
	a := submit(`{"command":"sleep 100","gpu_count":0}`)
	b := submit(`{"command":"true","gpu_count":0,"depends_on":"afterok:` + a.ID + `"}`)
	if b.DependsOn != "afterok:"+a.ID || b.PendingReason != api.ReasonDependency {
		t.Fatalf("submitted: depends_on %q, pending %q", b.DependsOn, b.PendingReason)
	}
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/queue/submit", `{"command":"true","depends_on":"afterok:jnosuchjob"}`, "depends_on"},
		{"POST", "/queue/submit", `{"command":"true","depends_on":"afterok"}`, "depends_on"},
		{"POST", "/queue/submit", `{"command":"true","depends_on":7}`, "depends_on"},
		{"PATCH", "/queue/" + b.ID + "/dependency", `{}`, "depends_on"},
		{"PATCH", "/queue/" + b.ID + "/dependency", `{"depends_on":"afterok:` + b.ID + `"}`, "depends_on"},
		{"PATCH", "/queue/" + b.ID + "/dependency", `{"depends_on":"singleton"}`, "depends_on"},
	} {
		resp, body := call(t, ts, c.method, c.path, c.body)
		var e api.ErrorBody
		if resp.StatusCode/100 != 4 || json.Unmarshal(body, &e) != nil || e.Error.Field != c.field {
			t.Errorf("%s %s %s: %d %s, want a 4xx naming %s", c.method, c.path, c.body, resp.StatusCode, body, c.field)
		}
	}
	resp, body := call(t, ts, "PATCH", "/queue/"+shortestUnique([]string{a.ID, b.ID}, 1, 6)+"/dependency", `{"depends_on":"afterany:`+a.ID+`"}`)
	var j api.Job
	if resp.StatusCode != 200 || json.Unmarshal(body, &j) != nil || j.ID != b.ID || j.DependsOn != "afterany:"+a.ID {
		t.Fatalf("PATCH dependency by prefix: %d %s", resp.StatusCode, body)
	}
	var cleared api.Job
	if resp, body := call(t, ts, "PATCH", "/queue/"+b.ID+"/dependency", `{"depends_on":""}`); resp.StatusCode != 200 || json.Unmarshal(body, &cleared) != nil || cleared.DependsOn != "" {
		t.Fatalf("PATCH dependency to none: %d %s", resp.StatusCode, body)
	}
	if resp, body := call(t, ts, "DELETE", "/queue/"+a.ID, ""); resp.StatusCode != 200 && resp.StatusCode != 202 {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	if resp, body := call(t, ts, "PATCH", "/queue/"+a.ID+"/dependency", `{"depends_on":""}`); resp.StatusCode != 409 {
		t.Errorf("PATCH dependency of a job no longer queued: %d %s, want 409", resp.StatusCode, body)
	}
}

// FuzzDependency: PATCH /queue/{id}/dependency never crashes and answers
// a bad body with a 4xx (the checks of fuzz_test.go).
func FuzzDependency(f *testing.F) {
	for _, s := range []string{`{"depends_on":""}`, `{"depends_on":"singleton"}`, `{"depends_on":"afterok:jx?afterany:jy"}`, `{"depends_on":null}`, `{"depends_on":7}`, `{}`} {
		f.Add([]byte(s))
	}
	fs := newFuzzServer(f)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/queue/submit", strings.NewReader(`{"command":"x","name":"n","gpu_count":8}`))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	fs.h.ServeHTTP(rec, req)
	var j struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || j.ID == "" {
		f.Fatalf("submit: %s", rec.Body.String())
	}
	f.Fuzz(func(t *testing.T, body []byte) { fs.check(t, "PATCH", "/queue/"+j.ID+"/dependency", body, false) })
}
