package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/store"
)

// fakeAgents is the agent pool seen from the server: it accepts every
// registration and answers every sync with no work.
type fakeAgents struct{}

func (fakeAgents) Register(_ context.Context, reg api.AgentRegistration, _ string) (api.AgentConfig, error) {
	return api.AgentConfig{NodeID: reg.NodeID, HeartbeatInterval: 5, NodeTTL: 30}, nil
}

func (fakeAgents) Sync(context.Context, api.AgentReport) (api.AgentWork, error) {
	return api.AgentWork{}, nil
}

const testJoinToken = "test-join-token-0123456789"

// authEnv is a server as it is (no credentials added) with tokens for
// each kind of caller.
type authEnv struct {
	t      *testing.T
	url    string
	o      *orchestrator.Orchestrator
	a      *auth.Service
	tokens map[string]string // caller -> secret
	seq    atomic.Int64
	notify Notifications // fakes: an in-memory store, a recording deliverer (notify_test.go)
}

// The callers of the role matrix. owner is alice, who owns the jobs and
// holds the matrix acts on; other is bob, a user who does not own them
// and administers no project of theirs; projadmin is carol, a user who
// administers their project (nlp).
var callers = []string{"anon", "revoked", "viewer", "owner", "other", "projadmin", "admin"}

func newAuthEnv(t *testing.T, opts ...Option) *authEnv {
	t.Helper()
	nt := fakeNotifications(t)
	h, o, a := newHandler(t, idleExec{}, slog.New(slog.DiscardHandler), append([]Option{WithAgents(fakeAgents{}, testJoinToken), WithNotify(nt), WithAdvise(noHistory{})}, opts...)...)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	e := &authEnv{t: t, url: ts.URL, o: o, a: a, tokens: map[string]string{"admin": testAdminToken}, notify: nt}
	ctx := context.Background()
	// Jobs stay queued, so that each cell of the matrix finds its job in
	// the same state.
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	mk := func(req api.TokenRequest) string {
		nt, err := a.Create(ctx, req, auth.Principal{User: "root", Role: api.RoleAdmin})
		if err != nil {
			t.Fatal(err)
		}
		return nt.Secret
	}
	e.tokens["viewer"] = mk(api.TokenRequest{User: "vera", Role: api.RoleViewer})
	e.tokens["owner"] = mk(api.TokenRequest{User: "alice", Role: api.RoleUser})
	e.tokens["other"] = mk(api.TokenRequest{User: "bob", Role: api.RoleUser, ProjectAdmin: []string{"vision"}})
	e.tokens["projadmin"] = mk(api.TokenRequest{User: "carol", Role: api.RoleUser, ProjectAdmin: []string{"nlp"}})
	rev, err := a.Create(ctx, api.TokenRequest{User: "alice", Role: api.RoleAdmin}, auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revoke(ctx, rev.ID); err != nil {
		t.Fatal(err)
	}
	e.tokens["revoked"] = rev.Secret
	return e
}

// do sends a request as caller; headers may add or override.
func (e *authEnv) do(caller, method, path, body string, headers map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, e.url+path, strings.NewReader(body))
	if tok := e.tokens[caller]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp, nil // a stream: the status is what counts
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// job submits a queued job of alice in project nlp (through the
// orchestrator, so the matrix has a fresh one for each cell).
func (e *authEnv) job() string {
	e.t.Helper()
	j, _, err := e.o.Submit(context.Background(), api.SubmitRequest{User: "alice", Project: "nlp", Command: "true", GPUCount: intp(8), Priority: api.RawValue(`"low"`)}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return j.ID
}

// hold holds a GPU for alice.
func (e *authEnv) hold() string {
	e.t.Helper()
	id := fmt.Sprintf("nb-%d", e.seq.Add(1))
	if _, err := e.o.FeatureOps().Holds.Hold(context.Background(), api.AllocateRequest{JobID: id, GPUCount: 1}, "alice"); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// token makes a token to revoke.
func (e *authEnv) token() string {
	e.t.Helper()
	nt, err := e.a.Create(context.Background(), api.TokenRequest{User: "zed"}, auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		e.t.Fatal(err)
	}
	return nt.ID
}

// endpoint adds a notification endpoint of alice's (scope user: her
// project's admin does not manage it).
func (e *authEnv) endpoint() string {
	e.t.Helper()
	ep, err := e.notify.Endpoints.Add(context.Background(), api.EndpointRequest{Kind: "slack", URL: "https://hooks.example.com/a", Scope: "user", User: "alice"}, "alice")
	if err != nil {
		e.t.Fatal(err)
	}
	return ep.ID
}

func intp(n int) *int { return &n }

// TestRoleMatrix is the role matrix: every route, called by every kind of
// caller, on a job or hold of its own or someone else's, answers the
// status in this one table.
func TestRoleMatrix(t *testing.T) {
	e := newAuthEnv(t)
	// Statuses in the order of callers: anon, revoked, viewer, owner,
	// other, projadmin, admin.
	type row struct {
		body   string
		status [7]int
	}
	var (
		read      = [7]int{401, 401, 200, 200, 200, 200, 200}
		adminOnly = func(ok int) [7]int { return [7]int{401, 401, 403, 403, 403, 403, ok} }
		mine      = func(ok int) [7]int { return [7]int{401, 401, 403, ok, 403, ok, ok} }
		anyUser   = func(ok int) [7]int { return [7]int{401, 401, 403, ok, ok, ok, ok} }
	)
	matrix := map[string]row{
		"GET /healthz":                           {"", [7]int{200, 200, 200, 200, 200, 200, 200}},
		"POST /queue/submit":                     {`{"command":"true","gpu_count":0}`, anyUser(201)},
		"GET /queue":                             {"", read},
		"GET /queue/statistics":                  {"", read},
		"DELETE /queue/{job_id}":                 {"", mine(200)},
		"PATCH /queue/{job_id}/priority":         {`{"priority":"high"}`, mine(200)},
		"PATCH /queue/{job_id}/dependency":       {`{"depends_on":""}`, mine(200)},
		"GET /jobs":                              {"", read},
		"GET /jobs/{job_id}":                     {"", read},
		"GET /jobs/{job_id}/logs":                {"", read},
		"GET /jobs/{job_id}/what-if":             {"", [7]int{401, 401, 422, 422, 422, 422, 422}}, // any token may read; without gpus=N, 422 naming gpus
		"GET /cluster/gpu-status":                {"", read},
		"GET /cluster/nodes":                     {"", read},
		"GET /cluster/nodes/{node_id}/history":   {"", read},
		"GET /advise":                            {"", read},
		"POST /cluster/nodes/{node_id}/{action}": {"", adminOnly(200)},
		"POST /cluster/gpu-allocate":             {`{"job_id":"{new_hold}","gpu_count":1}`, anyUser(201)},
		"POST /cluster/gpu-release":              {`{"job_id":"{hold}"}`, [7]int{401, 401, 403, 200, 403, 403, 200}},
		"GET /orchestrator/status":               {"", read},
		"POST /orchestrator/start":               {"", adminOnly(200)},
		"POST /orchestrator/stop":                {"", adminOnly(200)},
		"GET /orchestrator/policies":             {"", read},
		"PUT /orchestrator/policies":             {`{"backfill":true}`, adminOnly(200)},
		"GET /metrics":                           {"", read},
		"POST /agent/v1/register":                {`{"node_id":"x","hostname":"x","gpus":[],"tasks":[]}`, [7]int{401, 401, 401, 401, 401, 401, 401}},
		"POST /agent/v1/sync":                    {`{"node_id":"x","tasks":[]}`, [7]int{401, 401, 401, 401, 401, 401, 401}},
		"POST /agent/v1/logs":                    {`{"node_id":"x","job_id":"j","data":""}`, [7]int{401, 401, 401, 401, 401, 401, 401}},
		"POST /auth/tokens":                      {`{"user":"dan","role":"viewer"}`, adminOnly(201)},
		"GET /auth/tokens":                       {"", adminOnly(200)},
		"DELETE /auth/tokens/{id}":               {"", adminOnly(200)},
		"GET /auth/whoami":                       {"", read},
		"GET /complete/jobs":                     {"", read},
		"POST /auth/session":                     {`{"token":"{caller}"}`, [7]int{401, 401, 200, 200, 200, 200, 200}},
		"DELETE /auth/session":                   {"", [7]int{401, 401, 204, 204, 204, 204, 204}},
		"GET /audit":                             {"", adminOnly(200)},
		"GET /openapi.json":                      {"", read},
		"GET /history":                           {"", read},
		"GET /events":                            {"", read},
		"GET /arrays/{array_id}":                 {"", read},
		"PATCH /arrays/{array_id}":               {`{"throttle":2}`, mine(200)},
		"DELETE /arrays/{array_id}":              {"", mine(200)},
	}
	// The notification routes (notify_test.go); alice's endpoint is hers
	// (and an admin's) to manage, not her project's admin's.
	for k, v := range map[string]row{
		"GET /notify/endpoints":                     {"", anyUser(200)},
		"POST /notify/endpoints":                    {`{"kind":"slack","url":"https://hooks.example.com/x"}`, anyUser(201)},
		"DELETE /notify/endpoints/{endpoint_id}":    {"", [7]int{401, 401, 403, 200, 403, 403, 200}},
		"POST /notify/endpoints/{endpoint_id}/test": {"", [7]int{401, 401, 403, 200, 403, 403, 200}},
		"GET /notifications":                        {"", anyUser(200)},
		"GET /notify/defaults":                      {"", anyUser(200)},
		"PUT /notify/defaults":                      {`{"notify":"begin"}`, anyUser(200)},
	} {
		matrix[k] = v
	}
	// The usage routes (usage.go): reads for every token (a user's own
	// usage), writes for admins.
	for k, v := range map[string]row{
		"GET /usage":                          {"", read},
		"GET /prices":                         {"", read},
		"PUT /prices/{model}":                 {`{"dollars_per_hour":2.49}`, adminOnly(200)},
		"DELETE /prices/{model}":              {"", adminOnly(200)},
		"GET /budgets":                        {"", read},
		"PUT /budgets/{kind}/{name}":          {`{"gpu_hours":500}`, adminOnly(200)},
		"POST /budgets/{kind}/{name}/release": {"", adminOnly(200)},
		"DELETE /budgets/{kind}/{name}":       {"", adminOnly(204)},
	} {
		matrix[k] = v
	}
	// The shell routes (shell.go): the matrix's jobs are queued, so the
	// callers who may attach get 409 (a shell needs a running job).
	matrix["GET /jobs/{job_id}/shell"] = row{"", mine(409)}
	matrix["GET /agent/v1/tunnel"] = row{"", [7]int{401, 401, 401, 401, 401, 401, 401}}
	// The bookings' routes (reservations.go): alice's booking is hers and
	// an admin's to change; a user books for themselves.
	matrix["GET /reservations"] = row{"", read}
	matrix["POST /reservations"] = row{`{"name":"{new_booking}","gpus":1,"start":"{start}","duration":"1m"}`, anyUser(201)}
	matrix["GET /reservations/{name}"] = row{"", read}
	matrix["PATCH /reservations/{name}"] = row{`{"duration":"2m"}`, [7]int{401, 401, 403, 200, 403, 403, 200}}
	matrix["DELETE /reservations/{name}"] = row{"", [7]int{401, 401, 403, 200, 403, 403, 200}}
	// The sign-in routes (login.go): public ones answer everyone (the
	// codes are the credentials); an approval needs a signed-in caller.
	for k, v := range map[string]row{
		"POST /auth/device":         {"", [7]int{200, 200, 200, 200, 200, 200, 200}},
		"POST /auth/device/token":   {`{"device_code":"corral_unknown"}`, [7]int{410, 410, 410, 410, 410, 410, 410}},
		"POST /auth/device/approve": {`{"user_code":"{user_code}"}`, [7]int{401, 401, 200, 200, 200, 200, 200}},
		"POST /auth/invites":        {`{"user":"dan"}`, adminOnly(201)},
		"POST /auth/invites/redeem": {`{"code":"{invite}"}`, [7]int{201, 201, 201, 201, 201, 201, 201}},
		"POST /auth/login/node":     {`{"node_id":"x","user":"ana","uid":1000}`, [7]int{401, 401, 401, 401, 401, 401, 401}},
		"POST /auth/logout":         {`{"token":"{fresh_token}"}`, [7]int{200, 200, 200, 200, 200, 200, 200}},
	} {
		matrix[k] = v
	}
	s := New(nil, slog.New(slog.DiscardHandler))
	for _, rt := range s.routes {
		key := rt.method + " " + rt.path
		r, ok := matrix[key]
		if !ok {
			t.Errorf("%s is not in the role matrix", key)
			continue
		}
		delete(matrix, key)
		for i, caller := range callers {
			path := strings.NewReplacer("{node_id}", "n1", "{action}", "uncordon", "{model}", "H100", "{kind}/{name}", "project/vision").Replace(rt.path)
			body := r.body
			if strings.Contains(path, "{job_id}") {
				path = strings.Replace(path, "{job_id}", e.job(), 1)
			}
			if strings.Contains(path, "{array_id}") {
				path = strings.Replace(path, "{array_id}", e.array(), 1) // arrays_test.go
			}
			if strings.Contains(path, "{id}") {
				path = strings.Replace(path, "{id}", e.token(), 1)
			}
			if strings.Contains(path, "{endpoint_id}") {
				path = strings.Replace(path, "{endpoint_id}", e.endpoint(), 1)
			}
			if strings.Contains(path, "{name}") {
				path = strings.Replace(path, "{name}", e.booking(), 1) // reservations_test.go
			}
			body = strings.NewReplacer("{new_booking}", fmt.Sprintf("b-%d", e.seq.Add(1)), "{start}", bookingStart(e.seq.Add(1))).Replace(body)
			if strings.Contains(body, "{new_hold}") {
				body = strings.Replace(body, "{new_hold}", fmt.Sprintf("new-%d", e.seq.Add(1)), 1)
			}
			if strings.Contains(body, "{hold}") {
				body = strings.Replace(body, "{hold}", e.hold(), 1)
			}
			body = strings.Replace(body, "{caller}", e.tokens[caller], 1)
			body = e.loginPlaceholders(body) // login_test.go
			resp, b := e.do(caller, rt.method, path, body, nil)
			if key == "POST /cluster/gpu-allocate" && resp.StatusCode == http.StatusCreated {
				// Give the GPU back: the 8 GPUs must last the matrix.
				var h api.Hold
				if err := json.Unmarshal(b, &h); err != nil {
					t.Fatal(err)
				}
				if _, err := e.o.FeatureOps().Holds.Release(context.Background(), h.JobID); err != nil {
					t.Fatal(err)
				}
			}
			if resp.StatusCode != r.status[i] {
				t.Errorf("%s as %s: got %d, want %d: %s", key, caller, resp.StatusCode, r.status[i], truncate(string(b), 200))
			}
			if resp.StatusCode >= 400 {
				var eb api.ErrorBody
				if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
					t.Errorf("%s as %s: error answer is not {error:{code,message}}: %s", key, caller, truncate(string(b), 200))
				}
			}
		}
	}
	for key := range matrix {
		t.Errorf("the role matrix has %s, which is not a route", key)
	}
}

// TestAuditEveryMutatingRoute: after the role matrix's calls, each route
// that changes something has audit rows, for successes and refusals,
// with who, from where and the status.
func TestAuditEveryMutatingRoute(t *testing.T) {
	e := newAuthEnv(t)
	jobID := e.job()
	hold := e.hold()
	tok := e.token()
	arrayID := e.array()
	calls := []struct{ caller, method, path, body, action string }{
		{"owner", "PATCH", "/arrays/" + arrayID, `{"throttle":3}`, "array.throttle"},
		{"other", "DELETE", "/arrays/" + arrayID, "", "array.cancel"},
		{"owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0}`, "job.submit"},
		{"other", "DELETE", "/queue/" + jobID, "", "job.cancel"},
		{"owner", "PATCH", "/queue/" + jobID + "/priority", `{"priority":"high"}`, "job.priority"},
		{"projadmin", "PATCH", "/queue/" + jobID + "/dependency", `{"depends_on":""}`, "job.dependency"},
		{"admin", "POST", "/cluster/nodes/n1/drain", "", "node.drain"},
		{"owner", "POST", "/cluster/gpu-allocate", `{"job_id":"nb","gpu_count":1}`, "hold.create"},
		{"owner", "POST", "/cluster/gpu-release", `{"job_id":"` + hold + `"}`, "hold.release"},
		{"admin", "POST", "/orchestrator/stop", "", "orchestrator.stop"},
		{"admin", "POST", "/orchestrator/start", "", "orchestrator.start"},
		{"viewer", "PUT", "/orchestrator/policies", `{"backfill":true}`, "policy.set"},
		{"admin", "POST", "/auth/tokens", `{"user":"dan"}`, "token.create"},
		{"admin", "DELETE", "/auth/tokens/" + tok, "", "token.revoke"},
		{"owner", "POST", "/auth/session", `{"token":"` + e.tokens["owner"] + `"}`, "session.create"},
		{"owner", "DELETE", "/auth/session", "", "session.delete"},
		{"anon", "POST", "/agent/v1/register", `{"node_id":"x","gpus":[],"tasks":[]}`, "agent.register"},
		{"owner", "POST", "/notify/endpoints", `{"kind":"slack","url":"https://hooks.example.com/x"}`, "notify.endpoint.create"},
		{"owner", "POST", "/notify/endpoints/" + e.endpoint() + "/test", "", "notify.endpoint.test"},
		{"other", "DELETE", "/notify/endpoints/" + e.endpoint(), "", "notify.endpoint.remove"},
		{"owner", "PUT", "/notify/defaults", `{"notify":"begin,end"}`, "notify.defaults"},
		{"other", "GET", "/jobs/" + jobID + "/shell", "", "job.shell"},
		{"owner", "POST", "/reservations", `{"name":"audited","gpus":1,"start":"` + bookingStart(1) + `","duration":"1h"}`, "reservation.create"},
		{"other", "PATCH", "/reservations/" + e.booking(), `{"gpus":2}`, "reservation.update"},
		{"owner", "DELETE", "/reservations/" + e.booking(), "", "reservation.delete"},
		{"admin", "PUT", "/prices/H100", `{"dollars_per_hour":2.49}`, "price.set"},
		{"owner", "DELETE", "/prices/H100", "", "price.unset"},
		{"admin", "PUT", "/budgets/project/vision", `{"dollars":1200}`, "budget.set"},
		{"admin", "POST", "/budgets/project/vision/release", "", "budget.release"},
		{"viewer", "DELETE", "/budgets/project/vision", "", "budget.unset"},
		{"anon", "POST", "/auth/device", "", "login.device.start"},
		{"anon", "POST", "/auth/device/token", `{"device_code":"corral_unknown"}`, "login.device"},
		{"owner", "POST", "/auth/device/approve", e.loginPlaceholders(`{"user_code":"{user_code}"}`), "login.device.approve"},
		{"admin", "POST", "/auth/invites", `{"user":"dan"}`, "invite.create"},
		{"anon", "POST", "/auth/invites/redeem", e.loginPlaceholders(`{"code":"{invite}"}`), "login.invite"},
		{"anon", "POST", "/auth/login/node", `{"node_id":"x","user":"ana","uid":1000}`, "login.node"},
		{"anon", "POST", "/auth/logout", e.loginPlaceholders(`{"token":"{fresh_token}"}`), "login.logout"},
	}
	want := map[string]int{}
	for _, c := range calls {
		resp, _ := e.do(c.caller, c.method, c.path, c.body, nil)
		want[c.action] = resp.StatusCode
	}
	// Every audited route is covered above.
	for _, rt := range New(nil, slog.New(slog.DiscardHandler)).routes {
		if a := strings.Replace(rt.action, "{action}", "drain", 1); rt.action != "" {
			if _, ok := want[a]; !ok {
				t.Errorf("%s %s (%s) has no audit check", rt.method, rt.path, a)
			}
		} else if rt.method != "GET" && rt.path != "/agent/v1/sync" && rt.path != "/agent/v1/logs" {
			t.Errorf("%s %s changes something but is not audited", rt.method, rt.path)
		}
	}
	entries, err := e.a.Audit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.AuditEntry{}
	for _, en := range entries {
		if _, ok := got[en.Action]; !ok {
			got[en.Action] = en
		}
	}
	for action, status := range want {
		en, ok := got[action]
		switch {
		case !ok:
			t.Errorf("no audit row for %s", action)
		case en.Status != status || en.Remote != "127.0.0.1" || en.At.IsZero() || en.Method == "" || en.Path == "":
			t.Errorf("audit row for %s: %+v, want status %d from 127.0.0.1", action, en, status)
		}
	}
	if en := got["job.cancel"]; en.User != "bob" || en.Error != "not_owner" || en.Target != jobID {
		t.Errorf("refused cancel audited as %+v", en)
	}
	if en := got["policy.set"]; en.User != "vera" || en.Status != 403 {
		t.Errorf("refused policy change audited as %+v", en)
	}
	if en := got["job.submit"]; en.User != "alice" || en.Role != api.RoleUser || !strings.HasPrefix(en.Target, "j") {
		t.Errorf("submit audited as %+v", en)
	}
	// GET /audit: newest first, filtered, admins only.
	resp, b := e.do("admin", "GET", "/audit?user=alice&action=job.&since=1h", "", nil)
	var l api.AuditList
	if err := json.Unmarshal(b, &l); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /audit: %d %s", resp.StatusCode, b)
	}
	if len(l.Entries) != 2 || l.Entries[0].Action != "job.priority" || l.Entries[1].Action != "job.submit" {
		t.Errorf("GET /audit?user=alice&action=job.: %+v", l.Entries)
	}
}

// TestRevokedTokenFailsAtOnce: the call right after the revocation is
// refused.
func TestRevokedTokenFailsAtOnce(t *testing.T) {
	e := newAuthEnv(t)
	resp, b := e.do("admin", "POST", "/auth/tokens", `{"user":"eve","role":"user"}`, nil)
	var nt api.NewToken
	if err := json.Unmarshal(b, &nt); err != nil || resp.StatusCode != 201 || nt.Secret == "" {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	e.tokens["eve"] = nt.Secret
	if resp, _ := e.do("eve", "GET", "/auth/whoami", "", nil); resp.StatusCode != 200 {
		t.Fatalf("new token: %d", resp.StatusCode)
	}
	// The list never shows secrets.
	_, b = e.do("admin", "GET", "/auth/tokens", "", nil)
	if strings.Contains(string(b), nt.Secret) || !strings.Contains(string(b), nt.ID) {
		t.Fatalf("token list: %s", b)
	}
	if resp, b := e.do("admin", "DELETE", "/auth/tokens/"+nt.ID, "", nil); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do("eve", "GET", "/auth/whoami", "", nil)
	if resp.StatusCode != 401 || !strings.Contains(string(b), "bad_token") {
		t.Fatalf("revoked token: %d %s", resp.StatusCode, b)
	}
	// A dashboard session of a revoked token ends too.
	resp, _ = e.do("anon", "GET", "/queue", "", map[string]string{"Cookie": sessionCookie + "=" + nt.Secret})
	if resp.StatusCode != 401 {
		t.Fatalf("revoked session: %d", resp.StatusCode)
	}
}

// TestSubmitAsUser: the job's user comes from the token; a user cannot
// submit as someone else, an admin can; projects bound a user's token.
func TestSubmitAsUser(t *testing.T) {
	e := newAuthEnv(t)
	nt, err := e.a.Create(context.Background(), api.TokenRequest{User: "pia", Projects: []string{"vision", "nlp"}}, auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	e.tokens["pia"] = nt.Secret
	tests := []struct {
		caller, body      string
		status            int
		user, project, ec string
	}{
		{"owner", `{"command":"x","gpu_count":0}`, 201, "alice", "default", ""},
		{"owner", `{"command":"x","gpu_count":0,"user":"alice"}`, 201, "alice", "default", ""},
		{"owner", `{"command":"x","gpu_count":0,"user":"bob"}`, 403, "", "", "user_mismatch"},
		{"admin", `{"command":"x","gpu_count":0,"user":"bob"}`, 201, "bob", "default", ""},
		{"admin", `{"command":"x","gpu_count":0}`, 201, "root", "default", ""},
		{"pia", `{"command":"x","gpu_count":0}`, 201, "pia", "vision", ""},
		{"pia", `{"command":"x","gpu_count":0,"project":"nlp"}`, 201, "pia", "nlp", ""},
		{"pia", `{"command":"x","gpu_count":0,"project":"audio"}`, 403, "", "", "project_forbidden"},
		{"viewer", `{"command":"x","gpu_count":0}`, 403, "", "", "forbidden"},
	}
	for _, tt := range tests {
		resp, b := e.do(tt.caller, "POST", "/queue/submit", tt.body, nil)
		var j api.Job
		var eb api.ErrorBody
		json.Unmarshal(b, &j)
		json.Unmarshal(b, &eb)
		if resp.StatusCode != tt.status || j.User != tt.user || j.Project != tt.project || eb.Error.Code != tt.ec {
			t.Errorf("%s submits %s: %d %s", tt.caller, tt.body, resp.StatusCode, truncate(string(b), 300))
		}
	}
	// Idempotency keys are per caller: bob's "k" is not alice's "k".
	key := map[string]string{"Idempotency-Key": "k"}
	_, a := e.do("owner", "POST", "/queue/submit", `{"command":"x","gpu_count":0}`, key)
	_, b := e.do("other", "POST", "/queue/submit", `{"command":"x","gpu_count":0}`, key)
	var ja, jb api.Job
	json.Unmarshal(a, &ja)
	json.Unmarshal(b, &jb)
	if ja.ID == "" || ja.ID == jb.ID || jb.User != "bob" {
		t.Errorf("idempotency key shared across users: %s / %s", ja.ID, jb.ID)
	}
}

// TestSubmitRateLimit: a user over the rate gets 429 with Retry-After;
// admins are exempt.
func TestSubmitRateLimit(t *testing.T) {
	e := newAuthEnv(t, WithSubmitRate(0.5, 3))
	body := `{"command":"x","gpu_count":0}`
	for i := range 3 {
		if resp, b := e.do("owner", "POST", "/queue/submit", body, nil); resp.StatusCode != 201 {
			t.Fatalf("submission %d within the burst: %d %s", i, resp.StatusCode, b)
		}
	}
	resp, b := e.do("owner", "POST", "/queue/submit", body, nil)
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || ra < 1 || ra > 2 || !strings.Contains(string(b), "rate_limited") {
		t.Fatalf("over the rate: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	// Another user has a bucket of their own; admins have none.
	if resp, _ := e.do("other", "POST", "/queue/submit", body, nil); resp.StatusCode != 201 {
		t.Errorf("bob limited by alice's rate: %d", resp.StatusCode)
	}
	for range 5 {
		if resp, _ := e.do("admin", "POST", "/queue/submit", body, nil); resp.StatusCode != 201 {
			t.Fatalf("admin limited: %d", resp.StatusCode)
		}
	}
}

func TestRateLimiterRefills(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newRateLimiter(2, 2, func() time.Time { return now })
	for i := range 2 {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	ok, wait := l.allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("empty bucket: %v %v", ok, wait)
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("not refilled after 1/rate")
	}
	now = now.Add(time.Hour)
	for i := range 2 {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("refilled take %d refused", i)
		}
	}
	if ok, _ := l.allow("a"); ok {
		t.Fatal("bucket grew past its burst")
	}
}

// TestDashboardSession: POST /auth/session (with the dashboard's header)
// sets an HttpOnly SameSite=Strict cookie; cookie calls that change
// something need the dashboard's header and a same-origin Origin.
func TestDashboardSession(t *testing.T) {
	e := newAuthEnv(t)
	resp, _ := e.do("anon", "POST", "/auth/session", `{"token":"`+e.tokens["owner"]+`"}`, map[string]string{csrfHeader: "1"})
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			cookie = ck
		}
	}
	if resp.StatusCode != http.StatusOK || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in: %d cookie %+v", resp.StatusCode, cookie)
	}
	// A bad token sets no cookie.
	resp, _ = e.do("anon", "POST", "/auth/session", `{"token":"nope"}`, map[string]string{csrfHeader: "1"})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("bad token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	ck := map[string]string{"Cookie": sessionCookie + "=" + cookie.Value}
	if resp, b := e.do("anon", "GET", "/auth/whoami", "", ck); resp.StatusCode != 200 || !strings.Contains(string(b), `"session": true`) {
		t.Fatalf("whoami with the cookie: %d %s", resp.StatusCode, b)
	}
	body := `{"command":"x","gpu_count":0}`
	withHeader := map[string]string{"Cookie": ck["Cookie"], csrfHeader: "1"}
	crossSite := map[string]string{"Cookie": ck["Cookie"], csrfHeader: "1", "Origin": "https://evil.example"}
	sameSite := map[string]string{"Cookie": ck["Cookie"], csrfHeader: "1", "Origin": e.url}
	for _, tt := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"no header", ck, 403},
		{"header", withHeader, 201},
		{"cross-site origin", crossSite, 403},
		{"same origin", sameSite, 201},
	} {
		if resp, b := e.do("anon", "POST", "/queue/submit", body, tt.headers); resp.StatusCode != tt.status {
			t.Errorf("cookie submit, %s: %d %s", tt.name, resp.StatusCode, b)
		}
	}
	// Bearer tokens need no CSRF header.
	if resp, _ := e.do("owner", "POST", "/queue/submit", body, nil); resp.StatusCode != 201 {
		t.Errorf("bearer submit: %d", resp.StatusCode)
	}
}

// TestAgentReportsOnlyForItself: a sync or log shipment must carry the
// session of the registration of its node.
func TestAgentReportsOnlyForItself(t *testing.T) {
	e := newAuthEnv(t)
	join := map[string]string{"Authorization": "Bearer " + testJoinToken}
	register := func(node string) string {
		t.Helper()
		resp, b := e.do("anon", "POST", "/agent/v1/register", `{"node_id":"`+node+`","hostname":"h","gpus":[],"tasks":[]}`, join)
		var cfg api.AgentConfig
		if err := json.Unmarshal(b, &cfg); err != nil || resp.StatusCode != 200 || cfg.Session == "" {
			t.Fatalf("register %s: %d %s", node, resp.StatusCode, b)
		}
		return cfg.Session
	}
	a, b := register("node-a"), register("node-b")
	sync := func(node, session string) (int, string) {
		h := map[string]string{"Authorization": join["Authorization"]}
		if session != "" {
			h[api.AgentSessionHeader] = session
		}
		resp, body := e.do("anon", "POST", "/agent/v1/sync", `{"node_id":"`+node+`","tasks":[]}`, h)
		var eb api.ErrorBody
		json.Unmarshal(body, &eb)
		return resp.StatusCode, eb.Error.Code
	}
	for _, tt := range []struct {
		node, session string
		status        int
		code          string
	}{
		{"node-a", a, 200, ""},
		{"node-b", b, 200, ""},
		{"node-b", a, 403, "wrong_node"}, // a reports for b
		{"node-a", "", 403, "wrong_node"},
		{"node-c", a, 409, "unknown_node"}, // never registered: register first
	} {
		if st, code := sync(tt.node, tt.session); st != tt.status || code != tt.code {
			t.Errorf("sync %s with %s's session: %d %s, want %d %s", tt.node, tt.session, st, code, tt.status, tt.code)
		}
	}
	// A new registration of node-a ends the old session.
	a2 := register("node-a")
	if st, _ := sync("node-a", a); st != 403 {
		t.Errorf("old session after re-registration: %d", st)
	}
	if st, _ := sync("node-a", a2); st != 200 {
		t.Errorf("new session: %d", st)
	}
	resp, _ := e.do("anon", "POST", "/agent/v1/logs", `{"node_id":"node-a","job_id":"j","data":""}`,
		map[string]string{"Authorization": join["Authorization"], api.AgentSessionHeader: b})
	if resp.StatusCode != 403 {
		t.Errorf("logs for node-a with node-b's session: %d", resp.StatusCode)
	}
}

// TestPanicIsJSON500: a panic in a handler reaches the client as a JSON
// 500, never a dropped connection.
func TestPanicIsJSON500(t *testing.T) {
	s := New(nil, slog.New(slog.DiscardHandler))
	h := s.wrap(route{method: "GET", path: "/boom", access: public, handler: func(http.ResponseWriter, *http.Request) error { panic("boom") }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	var eb api.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != 500 || eb.Error.Code != "internal" {
		t.Fatalf("panic answered %d %s", rec.Code, rec.Body.String())
	}
}

// TestOpenAPISecurity: the description names how each route
// authenticates.
func TestOpenAPISecurity(t *testing.T) {
	e := newAuthEnv(t)
	_, b := e.do("viewer", "GET", "/openapi.json", "", nil)
	var doc struct {
		Components struct {
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
		Security []map[string][]string                `json:"security"`
		Paths    map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Components.SecuritySchemes["bearerToken"] == nil || len(doc.Security) == 0 {
		t.Fatalf("no security schemes: %s", truncate(string(b), 300))
	}
	if sec, ok := doc.Paths["/healthz"]["get"]["security"].([]any); !ok || len(sec) != 0 {
		t.Errorf("/healthz must need no token: %v", doc.Paths["/healthz"]["get"]["security"])
	}
	if _, ok := doc.Paths["/jobs"]["get"]["security"]; ok {
		t.Errorf("/jobs must use the global security")
	}
}

// TestEnvHiddenFromOthers: a job's environment values (where credentials
// go) are shown to those who may act on the job and hidden from the rest,
// in GET /jobs/{id} and GET /jobs alike; the names stay visible.
func TestEnvHiddenFromOthers(t *testing.T) {
	e := newAuthEnv(t)
	j, _, err := e.o.Submit(context.Background(), api.SubmitRequest{User: "alice", Project: "nlp", Command: "true",
		GPUCount: intp(1), Env: map[string]string{"WANDB_API_KEY": "s3cret"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caller string
		want   string
	}{
		{"viewer", hiddenValue},
		{"other", hiddenValue},
		{"owner", "s3cret"},
		{"projadmin", "s3cret"},
		{"admin", "s3cret"},
	} {
		t.Run(tc.caller, func(t *testing.T) {
			resp, body := e.do(tc.caller, "GET", "/jobs/"+j.ID, "", nil)
			var one api.Job
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &one) != nil {
				t.Fatalf("GET /jobs/%s: %d %s", j.ID, resp.StatusCode, body)
			}
			resp, body = e.do(tc.caller, "GET", "/jobs?user=alice", "", nil)
			var list api.JobList
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Jobs) != 1 {
				t.Fatalf("GET /jobs: %d %s", resp.StatusCode, body)
			}
			for where, env := range map[string]map[string]string{"job": one.Env, "list": list.Jobs[0].Env} {
				if got := env["WANDB_API_KEY"]; got != tc.want {
					t.Errorf("%s: WANDB_API_KEY = %q, want %q", where, got, tc.want)
				}
			}
		})
	}
	// Hiding is per answer: the job itself keeps its value.
	if got, _ := e.o.Job(j.ID); got.Env["WANDB_API_KEY"] != "s3cret" {
		t.Fatalf("the stored env changed: %v", got.Env)
	}
}

// TestOversizedBodiesAreCheap: a body whose Content-Length passes
// MaxBodyBytes is refused 413 before a byte of it is read, and oversized
// submissions count in the submission rate (11,816 of them once,
// not rate-limited and each read to the limit, added 200 MB).
func TestOversizedBodiesAreCheap(t *testing.T) {
	r := httptest.NewRequest("POST", "/queue/submit", unreadable{t})
	r.ContentLength = MaxBodyBytes + 1
	var e *api.Error
	if err := decode(r, &api.SubmitRequest{}); !errors.As(err, &e) || e.Status != 413 {
		t.Errorf("decode: %v, want 413", err)
	}

	// The server answers 413 without reading the body and closes the
	// connection; a client still writing the body may then meet a reset
	// before it reads the answer. A client that asks first (Expect:
	// 100-continue, as curl does for large bodies) never sends it.
	env := newAuthEnv(t, WithSubmitRate(0.5, 3))
	body := `{"command":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = time.Minute
	defer tr.CloseIdleConnections()
	for i, want := range []int{413, 413, 413, 429} {
		req, _ := http.NewRequest("POST", env.url+"/queue/submit", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.tokens["owner"])
		req.Header.Set("Expect", "100-continue")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("oversized submission %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("oversized submission %d: %d %.200s, want %d", i, resp.StatusCode, b, want)
		}
	}
}

// unreadable is a request body that fails the test when it is read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the body was read")
	return 0, io.EOF
}
