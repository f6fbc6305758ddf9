package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The request decoders under fuzzing: each target sends arbitrary bytes as
// the body of one route, as an admin (or an agent with its session), to
// the whole server (decoding, validation, the orchestrator). Whatever the
// body, the answer is never a 5xx and always JSON. The seed corpora are in
// testdata/fuzz/<target>; CI runs each target for a few seconds
// (.ci/run).

// fuzzServer is one server per fuzz target, shared by its inputs.
type fuzzServer struct {
	h       http.Handler
	session string
}

func newFuzzServer(f *testing.F) *fuzzServer {
	h, _, _ := newHandler(f, idleExec{}, slog.New(slog.DiscardHandler), WithAgents(fakeAgents{}, testJoinToken))
	fs := &fuzzServer{h: h}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/agent/v1/register", strings.NewReader(`{"node_id":"f1","hostname":"f1","gpus":[],"tasks":[]}`))
	req.Header.Set("Authorization", "Bearer "+testJoinToken)
	h.ServeHTTP(rec, req)
	var cfg struct{ Session string }
	if err := json.Unmarshal(rec.Body.Bytes(), &cfg); err != nil || cfg.Session == "" {
		f.Fatalf("register: %d %s", rec.Code, rec.Body.String())
	}
	fs.session = cfg.Session
	return fs
}

// check sends body to method path and fails on a 5xx or a non-JSON answer.
func (fs *fuzzServer) check(t *testing.T, method, path string, body []byte, agent bool) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if agent {
		req.Header.Set("Authorization", "Bearer "+testJoinToken)
		req.Header.Set("X-Corral-Agent-Session", fs.session)
	} else {
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
	}
	fs.h.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("%s %s with %q: %d %s", method, path, truncate(string(body), 200), rec.Code, rec.Body.String())
	}
	if rec.Code != http.StatusNoContent && !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s %s with %q: the answer is not JSON: %s", method, path, truncate(string(body), 200), rec.Body.String())
	}
}

func fuzzRoute(f *testing.F, method, path string, agent bool, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	fs := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) { fs.check(t, method, path, body, agent) })
}

func FuzzSubmit(f *testing.F) {
	fuzzRoute(f, "POST", "/queue/submit", false,
		`{"command":"python train.py","gpu_count":2,"priority":"high","estimated_duration":"1h30m"}`,
		`{"command":"x","gpu_count":0,"env":{"A":"1"},"node_labels":{"rack":"r1"},"time_limit":3600,"preempt_grace":"30s"}`,
		`{"command":"x","nodes":2,"gpu_count":4,"gpu_memory_gb":40,"gpu_type":"H100","max_retries":3,"user":"ana","project":"vision"}`,
		`{"command":"","gpu_count":-1}`, `[]`, `{"command":"x"} {}`, `{"priority":1e308}`,
		`{"command":"x","gpu_count":0,"time_limit":1e300,"estimated_duration":"9999999h","elastic_wait":"-1s"}`,
		`{"command":"x","gpu_count":0,"name":"a\u0000b","gpu_type":"\u0000","max_retries":2147483648}`)
}

// FuzzReservation: no booking, however far or odd its times, makes a
// commit fail (a booking ending in year 10000 once wedged the loop,
// and every later input answered 503).
func FuzzReservation(f *testing.F) {
	fuzzRoute(f, "POST", "/reservations", false,
		`{"name":"x3","gpus":1,"start":"9999-12-31T23:00:00Z","duration":"2h"}`,
		`{"name":"x4","gpus":1,"start":"2199-12-31T23:00:00Z","duration":"2h"}`,
		`{"name":"x5","gpus":1,"start":"2030-01-01T00:00:00Z","end":"9999-12-31T23:59:59Z"}`,
		`{"name":"x6","gpus":1,"start":"0001-01-01T00:00:00Z","duration":1e300}`,
		`{"name":"x7","gpus":2,"start":"2030-01-01T00:00:00+23:59","duration":"8h","flags":["weekly"],"users":["a\u0000"]}`,
		`{"name":"x8","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"2h","project":"\u0000","gpu_type":"\u00ff\u0000"}`)
}

func FuzzPolicies(f *testing.F) {
	fuzzRoute(f, "PUT", "/orchestrator/policies", false,
		`{"policy":"priority","preemption":true,"backfill":false}`,
		`{"aging_interval":"2h","half_life":"168h","min_run_time":"15m","preempt_grace":30}`,
		`{"weights":{"users":{"ana":2,"bob":null}},"quotas":{"projects":{"vision":16}}}`,
		`{"idle_threshold":5,"idle_window":"30m","idle_action":"notify"}`, `{"policy":7}`)
}

func FuzzAllocate(f *testing.F) {
	fuzzRoute(f, "POST", "/cluster/gpu-allocate", false,
		`{"job_id":"notebook","gpu_count":2,"memory_gb":40,"gpu_type":"H100"}`, `{"job_id":"","gpu_count":-3}`, `{"job_id":"x","gpu_count":99}`,
		`{"job_id":"a\u0000","gpu_count":1}`, `{"job_id":"far","gpu_count":1,"duration":1e300}`)
}

func FuzzRelease(f *testing.F) {
	fuzzRoute(f, "POST", "/cluster/gpu-release", false, `{"job_id":"notebook"}`, `{"job_id":7}`)
}

func FuzzPriority(f *testing.F) {
	for _, s := range []string{`{"priority":"critical"}`, `{"priority":3}`, `{"priority":null}`, `{"priority":"x"}`} {
		f.Add([]byte(s))
	}
	fs := newFuzzServer(f)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/queue/submit", strings.NewReader(`{"command":"x","gpu_count":8}`))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	fs.h.ServeHTTP(rec, req)
	var j struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || j.ID == "" {
		f.Fatalf("submit: %s", rec.Body.String())
	}
	f.Fuzz(func(t *testing.T, body []byte) { fs.check(t, "PATCH", "/queue/"+j.ID+"/priority", body, false) })
}

func FuzzTokenCreate(f *testing.F) {
	fuzzRoute(f, "POST", "/auth/tokens", false,
		`{"user":"ana","role":"user","projects":["vision","nlp"],"project_admin":["vision"],"description":"ci","expires_in":"720h"}`,
		`{"user":"grafana","role":"viewer"}`, `{"user":"","role":"root"}`, `{"user":"x","expires_in":-1}`,
		`{"user":"x","expires_in":"2562047h"}`, `{"user":"x","description":"\u0000"}`)
}

func FuzzSession(f *testing.F) {
	fuzzRoute(f, "POST", "/auth/session", false, `{"token":"nope"}`, `{"token":"`+testAdminToken+`"}`, `{}`, ``)
}

func FuzzAgentRegister(f *testing.F) {
	fuzzRoute(f, "POST", "/agent/v1/register", true,
		`{"node_id":"n2","hostname":"h","address":"10.0.0.2","labels":{"rack":"r2"},"gpus":[{"index":0,"uuid":"GPU-1","model":"H100","memory_mib":81920,"nvlink_peers":[1]}],"tasks":[],"simulated":true}`,
		`{"node_id":"","gpus":null}`, `{"node_id":"a/b"}`)
}

func FuzzAgentSync(f *testing.F) {
	fuzzRoute(f, "POST", "/agent/v1/sync", true,
		`{"node_id":"f1","generation":3,"wait":0,"telemetry":[{"index":0,"utilization":50,"memory_used_mib":100,"temperature":60}],"tasks":[{"job_id":"j1","attempt":0,"rank":0,"state":"running","pid":42}],"foreign":[{"gpu":0,"pid":7,"user":"x","name":"y"}]}`,
		`{"node_id":"f1","tasks":[{"job_id":"j1","state":"exited","exit_code":1,"signal":"killed"}]}`,
		`{"node_id":"other","tasks":[]}`, `{"node_id":"f1","wait":-5}`)
}

func FuzzAgentLogs(f *testing.F) {
	fuzzRoute(f, "POST", "/agent/v1/logs", true,
		`{"node_id":"f1","job_id":"j1","attempt":0,"rank":0,"offset":0,"data":"aGVsbG8K"}`,
		`{"node_id":"f1","job_id":"../../etc","attempt":-1,"offset":-1,"data":"!!"}`)
}
