package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestFarBookingRefused: a booking whose end falls past what the store
// can write (year 10000) is refused with 422 naming the field,
// changes nothing, and the server goes on taking changes and answering
// reads.
func TestFarBookingRefused(t *testing.T) {
	e := newAuthEnv(t)
	for _, c := range []struct{ body, field string }{
		{`{"name":"x3","gpus":1,"start":"9999-12-31T23:00:00Z","duration":"2h"}`, "start"},
		{`{"name":"x4","gpus":1,"start":"2030-01-01T00:00:00Z","end":"9999-12-31T23:00:00Z"}`, "end"},
		{`{"name":"x5","gpus":1,"start":"2199-12-31T23:00:00Z","duration":"2h"}`, "duration"},
		{`{"name":"x6","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"8785h"}`, "duration"},
		{`{"name":"x7","gpus":1,"start":"2030-01-01T00:00:00Z","duration":1e300}`, "duration"},
		{`{"name":"x8","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"2h","project":"a\u0000b"}`, "project"},
		{`{"name":"x9","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"2h","gpu_type":"\u0000"}`, "gpu_type"},
	} {
		resp, b := e.do("owner", "POST", "/reservations", c.body, nil)
		var eb api.ErrorBody
		if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field != c.field {
			t.Fatalf("POST /reservations %s: %d %s, want 422 naming %s", c.body, resp.StatusCode, b, c.field)
		}
	}
	resp, b := e.do("viewer", "GET", "/reservations", "", nil)
	var l api.ReservationList
	if resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil || len(l.Reservations) != 0 {
		t.Fatalf("GET /reservations: %d %s", resp.StatusCode, b)
	}
	// Changes still go through.
	resp, b = e.do("owner", "POST", "/reservations", `{"name":"ok","gpus":1,"start":"`+bookingStart(1)+`","duration":"1h"}`, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("a later booking: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do("owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0}`, nil)
	if resp.StatusCode >= 300 || strings.Contains(string(b), "store_unavailable") {
		t.Fatalf("a later submission: %d %s", resp.StatusCode, b)
	}
}

// TestRequestBounds: every kind of request refuses a time, duration, size
// or text it cannot store or compute with, with 422 naming the field
// (docs/limits.md).
func TestRequestBounds(t *testing.T) {
	e := newAuthEnv(t)
	cases := []struct {
		name, caller, method, path, body, field string
	}{
		{"submit: a NUL in the name", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"name":"a\u0000b"}`, "name"},
		{"submit: a NUL in gpu_type", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"gpu_type":"\u0000"}`, "gpu_type"},
		{"submit: a time limit past a year", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"time_limit":1e300}`, "time_limit"},
		{"submit: an estimate past a year", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"estimated_duration":"8785h"}`, "estimated_duration"},
		{"submit: infinite retries", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"max_retries":2147483647}`, "max_retries"},
		{"submit: a grace past a day", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"preempt_grace":"25h"}`, "preempt_grace"},
		{"submit: a huge array", "owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0,"array":"0-2147483647"}`, "array"},
		{"hold: a NUL in its name", "owner", "POST", "/cluster/gpu-allocate", `{"job_id":"a\u0000","gpu_count":1}`, "job_id"},
		{"hold: a duration past a year", "owner", "POST", "/cluster/gpu-allocate", `{"job_id":"h","gpu_count":1,"duration":1e300}`, "duration"},
		{"token: a NUL in the description", "admin", "POST", "/auth/tokens", `{"user":"x","description":"\u0000"}`, "description"},
		{"token: a lifetime past a year", "admin", "POST", "/auth/tokens", `{"user":"x","expires_in":"2562047h"}`, "expires_in"},
		{"budget: past the largest", "admin", "PUT", "/budgets/user/alice", `{"gpu_hours":1e300}`, "gpu_hours"},
		{"budget: dollars past the largest", "admin", "PUT", "/budgets/user/alice", `{"dollars":1e13}`, "dollars"},
		{"price: a NUL in the model", "admin", "PUT", "/prices/a%00b", `{"dollars_per_hour":1}`, "model"},
		{"price: past the largest", "admin", "PUT", "/prices/H100", `{"dollars_per_hour":1e300}`, "dollars_per_hour"},
		{"policy: a half-life past a year", "admin", "PUT", "/orchestrator/policies", `{"half_life":1e300}`, "half_life"},
		{"policy: starving after a century", "admin", "PUT", "/orchestrator/policies", `{"starve_after":"876000h"}`, "starve_after"},
		{"policy: a starve share past all", "admin", "PUT", "/orchestrator/policies", `{"starve_share":1e300}`, "starve_share"},
		{"policy: a negative tail factor", "admin", "PUT", "/orchestrator/policies", `{"tail_factor":-1}`, "tail_factor"},
		{"policy: a starving threshold of too many backlogs", "admin", "PUT", "/orchestrator/policies", `{"starve_backlog":5000}`, "starve_backlog"},
		{"policy: a light starving share over 1", "admin", "PUT", "/orchestrator/policies", `{"starve_light_share":2}`, "starve_light_share"},
		{"policy: a light starving floor past a year", "admin", "PUT", "/orchestrator/policies", `{"starve_light_floor":1e300}`, "starve_light_floor"},
		{"policy: a tail wait past the largest", "admin", "PUT", "/orchestrator/policies", `{"tail_wait":1e300}`, "tail_wait"},
		{"policy: a reservation after a year", "admin", "PUT", "/orchestrator/policies", `{"reserve_after":1e300}`, "reserve_after"},
		{"cancel: a grace past a year", "owner", "DELETE", "/queue/nope?grace=1e300", ``, "grace"},
		{"jobs: since year 9999", "viewer", "GET", "/jobs?since=9999-12-31T23:00:00Z", ``, "since"},
		{"jobs: until year 1", "viewer", "GET", "/jobs?until=0001-01-01T00:00:00Z", ``, "until"},
		{"audit: since year 9999", "admin", "GET", "/audit?since=9999-12-31T23:00:00Z", ``, "since"},
		{"history: since year 1", "viewer", "GET", "/history?since=0001-01-01T00:00:00Z", ``, "since"},
		{"usage: since year 9999", "viewer", "GET", "/usage?since=9999-01-01", ``, "since"},
		{"usage: until year 1", "viewer", "GET", "/usage?until=1900-01-01T00:00:00Z", ``, "until"},
		{"booking: a start in year 9999", "owner", "POST", "/reservations", `{"name":"b","gpus":1,"start":"9999-12-31T23:00:00Z","duration":"2h"}`, "start"},
		{"booking: too many users", "admin", "POST", "/reservations", `{"name":"b","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"2h","users":[` + strings.Repeat(`"u",`, 1100) + `"u"]}`, "users"},
	}
	for _, c := range cases {
		resp, b := e.do(c.caller, c.method, c.path, c.body, nil)
		var eb api.ErrorBody
		if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field != c.field {
			t.Errorf("%s: %d %s, want 422 naming %s", c.name, resp.StatusCode, b, c.field)
		}
	}
	// Nothing was changed, and the loop still takes changes.
	resp, b := e.do("owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0}`, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("a later submission: %d %s", resp.StatusCode, b)
	}
}
