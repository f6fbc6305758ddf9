package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// secretValue is the env value TestEnvHiddenOnEveryJobRoute plants; it
// must appear in no answer to a caller who may not act on its jobs.
const secretValue = "s3cret-hf-token-7f3a9c"

// readFirstEvent reads a server-sent event stream up to the data of its
// first event, or fails the test.
func readFirstEvent(t *testing.T, body io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return data
		}
	}
	t.Fatalf("the stream ended before its first event: %v", sc.Err())
	return ""
}

// TestEnvHiddenOnEveryJobRoute walks the route table: every route is
// classified as one that returns jobs (and is called here) or one that
// does not (and says why); a route in neither list fails the test, so a
// new route that returns jobs cannot be added without being checked.
// Each job route is called as a viewer and as another user, and the
// planted env value must appear nowhere in the answer (a stream: its
// first event; a change: its refusal); as the owner, the project's admin
// and an admin it must appear wherever the route answers with env at all.
func TestEnvHiddenOnEveryJobRoute(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	if _, err := e.o.SetScheduling(ctx, true); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HF_TOKEN": secretValue}
	running, _, err := e.o.Submit(ctx, api.SubmitRequest{User: "alice", Project: "nlp", Command: "true", GPUCount: intp(1), Env: env}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Wait for it to hold its GPU (it is then in the dashboard's active
	// jobs), so that the 8-GPU job below stays queued.
	deadline := time.After(10 * time.Second)
	for {
		changed := e.o.Changed()
		if j, err := e.o.Job(running.ID); err == nil && len(j.Allocation) > 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the job never got its GPU")
		}
	}
	queued, _, err := e.o.Submit(ctx, api.SubmitRequest{User: "alice", Project: "nlp", Command: "true", GPUCount: intp(8), Env: env}, "")
	if err != nil {
		t.Fatal(err)
	}

	// A fresh queued job of alice's with the secret, for a call that
	// changes its job (a cancel).
	fresh := func() string {
		j, _, err := e.o.Submit(ctx, api.SubmitRequest{User: "alice", Project: "nlp", Command: "true", GPUCount: intp(8), Env: env}, "")
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	type call struct{ method, path, body string }
	// The routes that return jobs: the calls that reach them (made anew
	// for each caller), and whether the answer carries env values at all
	// (GET /queue's rows do not).
	jobRoutes := map[string]struct {
		calls    func() []call
		carryEnv bool
	}{
		"GET /queue": {func() []call { return []call{{"GET", "/queue", ""}} }, false},
		"GET /jobs": {func() []call {
			return []call{{"GET", "/jobs", ""}, {"GET", "/jobs?state=queued", ""}}
		}, true},
		"GET /jobs/{job_id}": {func() []call {
			return []call{{"GET", "/jobs/" + running.ID, ""}, {"GET", "/jobs/" + queued.ID, ""}}
		}, true},
		"GET /events": {func() []call { return []call{{"GET", "/events", ""}} }, true},
		"POST /queue/submit": {func() []call {
			return []call{{"POST", "/queue/submit", `{"user":"alice","project":"nlp","command":"true","gpu_count":8,"env":{"HF_TOKEN":"` + secretValue + `"}}`}}
		}, true},
		"DELETE /queue/{job_id}": {func() []call { return []call{{"DELETE", "/queue/" + fresh(), ""}} }, true},
		"PATCH /queue/{job_id}/priority": {func() []call {
			return []call{{"PATCH", "/queue/" + queued.ID + "/priority", `{"priority":"high"}`}}
		}, true},
		"PATCH /queue/{job_id}/dependency": {func() []call {
			return []call{{"PATCH", "/queue/" + queued.ID + "/dependency", `{"depends_on":""}`}}
		}, true},
	}
	// The routes that return no job, and why.
	noJobs := map[string]string{
		"GET /healthz":                           "liveness only",
		"GET /queue/statistics":                  "counts and times",
		"GET /jobs/{job_id}/logs":                "a job's output, which is shared (docs/security.md)",
		"GET /jobs/{job_id}/what-if":             "a start time and a pending reason; no job, no env",
		"GET /cluster/gpu-status":                "nodes and GPUs; a GPU names its job's id only",
		"GET /cluster/nodes":                     "as /cluster/gpu-status",
		"GET /cluster/nodes/{node_id}/history":   "telemetry samples",
		"GET /advise":                            "a load profile: counts and GPU-hours, no job",
		"GET /orchestrator/status":               "the loop's status",
		"GET /orchestrator/policies":             "the policy",
		"GET /metrics":                           "Prometheus counters",
		"GET /auth/tokens":                       "tokens, without secrets",
		"GET /auth/whoami":                       "the caller",
		"GET /complete/jobs":                     "the caller's own jobs' numbers, ids, names and states",
		"GET /audit":                             "the audit trail",
		"GET /openapi.json":                      "the API description",
		"GET /history":                           "cluster totals over time",
		"POST /cluster/nodes/{node_id}/{action}": "the node",
		"POST /cluster/gpu-allocate":             "a hold, which has no env",
		"POST /cluster/gpu-release":              "a hold, which has no env",
		"POST /orchestrator/start":               "the loop's status",
		"POST /orchestrator/stop":                "the loop's status",
		"PUT /orchestrator/policies":             "the policy",
		"POST /agent/v1/register":                "the node's configuration",
		"POST /agent/v1/sync":                    "task specs, env included, to the node's agent only (join token and node session)",
		"POST /agent/v1/logs":                    "an acknowledgement",
		"POST /auth/tokens":                      "the new token",
		"POST /auth/device":                      "a device sign-in's codes",
		"POST /auth/device/token":                "a sign-in's token",
		"POST /auth/device/approve":              "who approved",
		"POST /auth/invites":                     "the invite",
		"POST /auth/invites/redeem":              "a sign-in's token",
		"POST /auth/login/node":                  "a sign-in's token",
		"POST /auth/logout":                      "the revoked token",
		"DELETE /auth/tokens/{id}":               "the revoked token",
		"POST /auth/session":                     "the caller",
		"DELETE /auth/session":                   "nothing",
		"GET /arrays/{array_id}":                 "an array's spec (command, not env) and counts",
		"PATCH /arrays/{array_id}":               "as GET /arrays/{array_id}",
		"DELETE /arrays/{array_id}":              "as GET /arrays/{array_id}",
	}
	for k, v := range map[string]string{
		"GET /notify/endpoints":                     "notification endpoints, redacted",
		"POST /notify/endpoints":                    "the new endpoint",
		"DELETE /notify/endpoints/{endpoint_id}":    "the removed endpoint",
		"POST /notify/endpoints/{endpoint_id}/test": "whether it was delivered",
		"GET /notifications":                        "delivery states and one-line summaries, which hold no env (notify.Event)",
		"GET /notify/defaults":                      "a user's notification defaults",
		"GET /usage":                                "usage totals by group (no job specs)",
		"GET /prices":                               "GPU prices",
		"PUT /prices/{model}":                       "GPU prices",
		"DELETE /prices/{model}":                    "GPU prices",
		"GET /budgets":                              "budgets and their spend",
		"PUT /budgets/{kind}/{name}":                "a budget",
		"POST /budgets/{kind}/{name}/release":       "a budget",
		"DELETE /budgets/{kind}/{name}":             "nothing",
		"PUT /notify/defaults":                      "a user's notification defaults",
	} {
		noJobs[k] = v
	}
	// The shell routes (shell.go).
	noJobs["GET /jobs/{job_id}/shell"] = "a shell's bytes, only to the job's owner, its project's admins and admins"
	noJobs["GET /agent/v1/tunnel"] = "the agent's tunnel to its own node (join token and node session)"
	// The bookings' routes (reservations.go).
	noJobs["GET /reservations"] = "bookings, which name GPUs and users, no job"
	noJobs["POST /reservations"] = "the new booking"
	noJobs["GET /reservations/{name}"] = "a booking"
	noJobs["PATCH /reservations/{name}"] = "a booking"
	noJobs["DELETE /reservations/{name}"] = "a booking"
	seen := map[string]bool{}
	for _, rt := range New(nil, nil).routes {
		key := rt.method + " " + rt.path
		seen[key] = true
		_, isJobs := jobRoutes[key]
		_, isNot := noJobs[key]
		if isJobs == isNot {
			t.Errorf("%s is not classified: add it to jobRoutes (it returns jobs) or to noJobs (it does not, and why)", key)
		}
	}
	for key := range jobRoutes {
		if !seen[key] {
			t.Errorf("jobRoutes has %s, which is not a route", key)
		}
	}
	for key := range noJobs {
		if !seen[key] {
			t.Errorf("noJobs has %s, which is not a route", key)
		}
	}

	do := func(t *testing.T, caller string, c call) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, c.method, e.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+e.tokens[caller])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", c.method, c.path, caller, err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			return resp.StatusCode, readFirstEvent(t, resp.Body)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for route, r := range jobRoutes {
		for _, caller := range []string{"viewer", "other", "owner", "projadmin", "admin"} {
			for _, c := range r.calls() {
				t.Run(c.method+" "+c.path+" as "+caller, func(t *testing.T) {
					status, body := do(t, caller, c)
					mayAct := caller == "owner" || caller == "projadmin" || caller == "admin"
					ok := status >= 200 && status < 300
					switch {
					case c.method == http.MethodGet && !ok:
						t.Fatalf("%d: %s", status, truncate(body, 300))
					case (caller == "owner" || caller == "admin") && !ok:
						t.Fatalf("%d for one who may act on the job: %s", status, truncate(body, 300))
					}
					has := strings.Contains(body, secretValue)
					hidden := strings.Contains(body, `"HF_TOKEN":"`+hiddenValue+`"`) || strings.Contains(body, `"HF_TOKEN": "`+hiddenValue+`"`)
					switch {
					case !mayAct && has:
						t.Errorf("(%s) shows the env value to %s: %s", route, caller, truncate(body, 300))
					case !mayAct && ok && r.carryEnv && !hidden:
						t.Errorf("(%s) does not show %s the name with %s: %s", route, caller, hiddenValue, truncate(body, 300))
					case mayAct && ok && r.carryEnv && !has:
						t.Errorf("(%s) hides the env value from %s, who may act on the job: %s", route, caller, truncate(body, 300))
					}
				})
			}
		}
	}
}
