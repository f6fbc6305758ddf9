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

// TestEnvHiddenOnEveryJobRoute walks the route table: every GET route is
// classified as one that returns jobs (and is called here) or one that
// does not (and says why); a route in neither list fails the test, so a
// new route that returns jobs cannot be added without being checked.
// Each job route is called as a viewer and as another user, and the
// planted env value must appear nowhere in the answer (a stream: its
// first event); as the owner, the project's admin and an admin it must
// appear wherever the route carries env at all.
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

	// The GET routes that return jobs: the calls that reach them (the
	// running and the queued job), and whether the answer carries env
	// values at all (GET /queue's rows do not).
	jobRoutes := map[string]struct {
		calls    []string
		carryEnv bool
	}{
		"/queue":         {[]string{"/queue"}, false},
		"/jobs":          {[]string{"/jobs", "/jobs?state=queued"}, true},
		"/jobs/{job_id}": {[]string{"/jobs/" + running.ID, "/jobs/" + queued.ID}, true},
		"/events":        {[]string{"/events"}, true},
	}
	// The GET routes that return no job, and why.
	noJobs := map[string]string{
		"/healthz":                         "liveness only",
		"/queue/statistics":                "counts and times",
		"/jobs/{job_id}/logs":              "a job's output, which is shared (docs/security.md)",
		"/cluster/gpu-status":              "nodes and GPUs; a GPU names its job's id only",
		"/cluster/nodes":                   "as /cluster/gpu-status",
		"/cluster/nodes/{node_id}/history": "telemetry samples",
		"/orchestrator/status":             "the loop's status",
		"/orchestrator/policies":           "the policy",
		"/metrics":                         "Prometheus counters",
		"/auth/tokens":                     "tokens, without secrets",
		"/auth/whoami":                     "the caller",
		"/audit":                           "the audit trail",
		"/openapi.json":                    "the API description",
		"/history":                         "cluster totals over time",
	}
	seen := map[string]bool{}
	for _, rt := range New(nil, nil).routes {
		if rt.method != http.MethodGet {
			continue
		}
		seen[rt.path] = true
		_, isJobs := jobRoutes[rt.path]
		_, isNot := noJobs[rt.path]
		if isJobs == isNot {
			t.Errorf("GET %s is not classified: add it to jobRoutes (it returns jobs) or to noJobs (it does not, and why)", rt.path)
		}
	}
	for path := range jobRoutes {
		if !seen[path] {
			t.Errorf("jobRoutes has GET %s, which is not a route", path)
		}
	}
	for path := range noJobs {
		if !seen[path] {
			t.Errorf("noJobs has GET %s, which is not a route", path)
		}
	}

	get := func(t *testing.T, caller, path string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens[caller])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s as %s: %v", path, caller, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as %s: %d", path, caller, resp.StatusCode)
		}
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			return readFirstEvent(t, resp.Body)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for route, r := range jobRoutes {
		for _, path := range r.calls {
			for _, caller := range []string{"viewer", "other", "owner", "projadmin", "admin"} {
				t.Run(path+"/"+caller, func(t *testing.T) {
					body := get(t, caller, path)
					mayAct := caller == "owner" || caller == "projadmin" || caller == "admin"
					has := strings.Contains(body, secretValue)
					hidden := strings.Contains(body, `"HF_TOKEN":"`+hiddenValue+`"`) || strings.Contains(body, `"HF_TOKEN": "`+hiddenValue+`"`)
					switch {
					case !mayAct && has:
						t.Errorf("GET %s (%s) as %s shows the env value: %s", path, route, caller, truncate(body, 300))
					case !mayAct && r.carryEnv && !hidden:
						t.Errorf("GET %s (%s) as %s does not show the name with %s: %s", path, route, caller, hiddenValue, truncate(body, 300))
					case mayAct && r.carryEnv && !has:
						t.Errorf("GET %s (%s) as %s hides the env value from one who may act on the job: %s", path, route, caller, truncate(body, 300))
					}
				})
			}
		}
	}
}
