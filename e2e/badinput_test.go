package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestBadInputs sends a table of bad requests: each gets the documented
// status and a JSON error naming the offending field, and none of them
// changes anything or hurts the server.
func TestBadInputs(t *testing.T) {
	s := startServer(t)

	big := `{"command": "` + strings.Repeat("a", 2<<20) + `"}`
	longKey := strings.Repeat("k", 300)

	type row struct {
		name        string
		method      string
		path        string
		body        string
		headers     map[string]string
		wantStatus  int
		wantCode    string // "" : any code
		wantField   string // "" : no field expected (not checked)
		wantMessage string // a substring of the message; "" : not checked
	}
	submit := func(name, body string, status int, field string) row {
		return row{name: name, method: "POST", path: "/queue/submit", body: body, wantStatus: status, wantField: field}
	}
	rows := []row{
		// Unreadable bodies: 400.
		{name: "malformed JSON", method: "POST", path: "/queue/submit", body: `{"command": "true",`, wantStatus: 400, wantCode: "malformed_json"},
		{name: "not JSON at all", method: "POST", path: "/queue/submit", body: `command=true`, wantStatus: 400},
		{name: "empty body", method: "POST", path: "/queue/submit", body: ``, wantStatus: 400},
		{name: "JSON array", method: "POST", path: "/queue/submit", body: `[{"command": "true"}]`, wantStatus: 400},
		{name: "JSON string", method: "POST", path: "/queue/submit", body: `"true"`, wantStatus: 400},
		{name: "two JSON values", method: "POST", path: "/queue/submit", body: `{"command": "true"} {"command": "true"}`, wantStatus: 400},
		{name: "unknown field", method: "POST", path: "/queue/submit", body: `{"command": "true", "gpus": 2}`, wantStatus: 400, wantField: "gpus"},
		// The server refuses it unread and closes the connection, so a
		// client still sending it may meet a reset before the answer;
		// one that asks first (as curl does for large bodies) does not.
		{name: "body over 1 MiB", method: "POST", path: "/queue/submit", body: big, wantStatus: 413,
			headers: map[string]string{"Expect": "100-continue"}},
		{name: "Idempotency-Key too long", method: "POST", path: "/queue/submit", body: `{"command": "true"}`,
			headers: map[string]string{"Idempotency-Key": longKey}, wantStatus: 400},

		// Invalid fields: 422 naming the field.
		submit("gpu_count negative", `{"command": "true", "gpu_count": -1}`, 422, "gpu_count"),
		{name: "gpu_count above the largest node", method: "POST", path: "/queue/submit", body: `{"command": "true", "gpu_count": 9}`,
			wantStatus: 422, wantField: "gpu_count", wantMessage: "8"},
		submit("gpu_count absurd", `{"command": "true", "gpu_count": 1000000000}`, 422, "gpu_count"),
		submit("gpu_count beyond int64", `{"command": "true", "gpu_count": 1e30}`, 422, "gpu_count"),
		submit("gpu_count a string", `{"command": "true", "gpu_count": "two"}`, 422, "gpu_count"),
		submit("gpu_count a fraction", `{"command": "true", "gpu_count": 1.5}`, 422, "gpu_count"),
		submit("gpu_count an object", `{"command": "true", "gpu_count": {"n": 1}}`, 422, "gpu_count"),
		submit("empty command", `{"command": ""}`, 422, "command"),
		submit("missing command", `{"gpu_count": 1}`, 422, "command"),
		submit("whitespace command", `{"command": "  \t\n "}`, 422, "command"),
		submit("empty object", `{}`, 422, "command"),
		submit("command not a string", `{"command": ["echo", "hi"]}`, 422, "command"),
		submit("priority unknown name", `{"command": "true", "priority": "urgent"}`, 422, "priority"),
		submit("priority out of range", `{"command": "true", "priority": 7}`, 422, "priority"),
		submit("priority zero", `{"command": "true", "priority": 0}`, 422, "priority"),
		submit("priority a fraction", `{"command": "true", "priority": 2.5}`, 422, "priority"),
		submit("estimated_duration a word", `{"command": "true", "estimated_duration": "soon"}`, 422, "estimated_duration"),
		submit("estimated_duration negative", `{"command": "true", "estimated_duration": -5}`, 422, "estimated_duration"),
		submit("nodes 2 on a one-node cluster", `{"command": "true", "gpu_count": 1, "nodes": 2}`, 422, "nodes"),
		submit("nodes negative", `{"command": "true", "nodes": -1}`, 422, "nodes"),
		submit("gpu_memory_gb above the largest GPU", `{"command": "true", "gpu_count": 1, "gpu_memory_gb": 500}`, 422, "gpu_memory_gb"),
		submit("gpu_memory_gb negative", `{"command": "true", "gpu_count": 1, "gpu_memory_gb": -1}`, 422, "gpu_memory_gb"),
		submit("gpu_type absent from the cluster", `{"command": "true", "gpu_count": 1, "gpu_type": "TPU"}`, 422, "gpu_type"),
		submit("env sets CUDA_VISIBLE_DEVICES", `{"command": "true", "env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}}`, 422, "env"),
		submit("env sets a CORRAL_ variable", `{"command": "true", "env": {"CORRAL_JOB_ID": "x"}}`, 422, "env"),
		submit("env bad name", `{"command": "true", "env": {"1BAD=": "x"}}`, 422, "env"),
		submit("env value not a string", `{"command": "true", "env": {"A": 1}}`, 422, "env"),
		submit("max_retries negative", `{"command": "true", "max_retries": -1}`, 422, "max_retries"),
		submit("max_retries absurd", `{"command": "true", "max_retries": 1000000}`, 422, "max_retries"),
		submit("relative workdir", `{"command": "true", "workdir": "relative/dir"}`, 422, "workdir"),
		submit("user with spaces", `{"command": "true", "user": "bob smith"}`, 422, "user"),
		submit("command with a NUL byte", `{"command": "echo a\u0000b"}`, 422, "command"),

		// Unknown jobs: 404.
		{name: "GET unknown job", method: "GET", path: "/jobs/j-does-not-exist", wantStatus: 404, wantCode: "not_found"},
		{name: "GET logs of unknown job", method: "GET", path: "/jobs/j-does-not-exist/logs", wantStatus: 404},
		{name: "DELETE unknown job", method: "DELETE", path: "/queue/j-does-not-exist", wantStatus: 404},
		{name: "PATCH priority of unknown job", method: "PATCH", path: "/queue/j-does-not-exist/priority", body: `{"priority": "high"}`, wantStatus: 404},
		{name: "PATCH priority bad value", method: "PATCH", path: "/queue/j-does-not-exist/priority", body: `{"priority": "urgent"}`, wantStatus: 422, wantField: "priority"},
		{name: "PATCH priority missing", method: "PATCH", path: "/queue/j-does-not-exist/priority", body: `{}`, wantStatus: 422, wantField: "priority"},
		{name: "PATCH priority malformed", method: "PATCH", path: "/queue/j-does-not-exist/priority", body: `{"priority":`, wantStatus: 400},
		{name: "DELETE with a bad grace", method: "DELETE", path: "/queue/j-does-not-exist?grace=forever", wantStatus: 422, wantField: "grace"},

		// Held GPUs.
		{name: "gpu-allocate negative count", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpu_count": -2}`, wantStatus: 422, wantField: "gpu_count"},
		{name: "gpu-allocate too many", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpu_count": 9}`, wantStatus: 422, wantField: "gpu_count"},
		{name: "gpu-allocate count a string", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpu_count": "all"}`, wantStatus: 422, wantField: "gpu_count"},
		{name: "gpu-allocate not a MIG profile", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpu_count": 1, "mig_profile": "half"}`, wantStatus: 422, wantField: "mig_profile"},
		{name: "gpu-allocate a slice of 2 GPUs", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpu_count": 2, "mig_profile": "1g.10gb"}`, wantStatus: 422, wantField: "gpu_count"},
		{name: "gpu-allocate compute without a share", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpu_count": 1, "gpu_compute": 30}`, wantStatus: 422, wantField: "gpu_compute"},
		{name: "gpu-allocate without job_id", method: "POST", path: "/cluster/gpu-allocate", body: `{"gpu_count": 1}`, wantStatus: 422, wantField: "job_id"},
		{name: "gpu-allocate unknown field", method: "POST", path: "/cluster/gpu-allocate", body: `{"job_id": "ext", "gpus": 1}`, wantStatus: 400, wantField: "gpus"},
		{name: "gpu-release unknown hold", method: "POST", path: "/cluster/gpu-release", body: `{"job_id": "never-held"}`, wantStatus: 404},
		{name: "gpu-release without job_id", method: "POST", path: "/cluster/gpu-release", body: `{}`, wantStatus: 422, wantField: "job_id"},

		// Policies.
		{name: "PUT unknown policy", method: "PUT", path: "/orchestrator/policies", body: `{"policy": "lottery"}`, wantStatus: 422, wantField: "policy"},
		{name: "PUT policies unknown field", method: "PUT", path: "/orchestrator/policies", body: `{"policy": "fcfs", "speed": 11}`, wantStatus: 400, wantField: "speed"},

		// Filters.
		{name: "jobs with an unknown state", method: "GET", path: "/jobs?state=sleeping", wantStatus: 422, wantField: "state"},
		{name: "jobs with a bad since", method: "GET", path: "/jobs?since=yesterday", wantStatus: 422, wantField: "since"},

		// Routes.
		{name: "wrong method on submit", method: "GET", path: "/queue/submit", wantStatus: 405},
		{name: "wrong method on jobs", method: "DELETE", path: "/jobs", wantStatus: 405},
		{name: "wrong method on gpu-status", method: "POST", path: "/cluster/gpu-status", body: `{}`, wantStatus: 405},
		{name: "wrong method on healthz", method: "POST", path: "/healthz", wantStatus: 405},
		{name: "unknown route", method: "GET", path: "/no/such/route", wantStatus: 404},
	}

	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" || tc.method == "POST" || tc.method == "PUT" || tc.method == "PATCH" {
				body = tc.body
			}
			r, err := s.send(tc.method, tc.path, body, tc.headers)
			if err != nil {
				t.Fatalf("%s %s: no answer: %v", tc.method, tc.path, err)
			}
			if r.Status != tc.wantStatus {
				t.Fatalf("%s %s: want HTTP %d, got %s", tc.method, tc.path, tc.wantStatus, r)
			}
			e := errorBody(t, r)
			if tc.wantCode != "" && e.Code != tc.wantCode {
				t.Errorf("code: want %q, got %q (%s)", tc.wantCode, e.Code, e.Message)
			}
			if tc.wantField != "" && e.Field != tc.wantField {
				t.Errorf("field: want %q, got %q (code %s: %s)", tc.wantField, e.Field, e.Code, e.Message)
			}
			if tc.wantStatus == 422 && e.Field == "" {
				t.Errorf("a 422 must name the field; got code %s: %s", e.Code, e.Message)
			}
			if tc.wantMessage != "" && !strings.Contains(e.Message, tc.wantMessage) {
				t.Errorf("message %q should mention %q", e.Message, tc.wantMessage)
			}
			if tc.wantStatus == 405 && r.Header.Get("Allow") == "" {
				t.Errorf("a 405 should say which methods are allowed (Allow header)")
			}
		})
	}

	// Nothing above changed anything, and the server is fine.
	if !s.healthy() {
		t.Fatalf("the server is not healthy after the bad inputs")
	}
	if js := s.jobs(); len(js) != 0 {
		t.Errorf("bad input created %d jobs, e.g. %s %q", len(js), js[0].ID, js[0].Command)
	}
	c := s.cluster()
	if c.TotalGPUs != 8 || c.AvailableGPUs != 8 || c.AllocatedGPUs != 0 || c.HeldGPUs != 0 {
		t.Errorf("bad input changed the GPUs: total %d, available %d, allocated %d, held %d",
			c.TotalGPUs, c.AvailableGPUs, c.AllocatedGPUs, c.HeldGPUs)
	}
	var q struct {
		QueuedJobs []any `json:"queued_jobs"`
	}
	s.mustJSON("GET", "/queue", nil, http.StatusOK, &q)
	if len(q.QueuedJobs) != 0 {
		t.Errorf("bad input queued %d jobs", len(q.QueuedJobs))
	}
	var p struct {
		Policy string `json:"policy"`
	}
	s.mustJSON("GET", "/orchestrator/policies", nil, http.StatusOK, &p)
	if p.Policy == "lottery" || p.Policy == "" {
		t.Errorf("the policy is %q after a refused change", p.Policy)
	}
	// And it still does real work.
	j := s.submit(map[string]any{"command": "true", "gpu_count": 1})
	s.waitState(j.ID, api.StateCompleted, 30*time.Second)
}
