package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Notifications, black-box: a real webhook receiver in the test
// process checks each POST's X-Corral-Signature, answers 503 while told
// to fail, and records every event it accepts (a digest's one by one).

// hookEvent is one event as a receiver saw it.
type hookEvent struct {
	EventID string
	Kind    string
	JobID   string
	Body    string // the whole POST it came in
}

// receiver is a webhook endpoint.
type receiver struct {
	*httptest.Server
	secret string

	mu      sync.Mutex
	failing bool
	posts   int // accepted POSTs
	refused int // 503s answered
	badSig  []string
	events  []hookEvent
}

// newReceiver starts a receiver; its URL's path is a secret of its own.
func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{secret: secret}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	mac := hmac.New(sha256.New, []byte(r.secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	r.mu.Lock()
	defer r.mu.Unlock()
	if !hmac.Equal([]byte(want), []byte(req.Header.Get("X-Corral-Signature"))) {
		r.badSig = append(r.badSig, string(body))
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if r.failing {
		r.refused++
		http.Error(w, "down for a while", http.StatusServiceUnavailable)
		return
	}
	type ev struct {
		EventID string `json:"event_id"`
		Kind    string `json:"kind"`
		Job     *struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	var msg struct {
		ev
		Events []ev `json:"events"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	r.posts++
	evs := msg.Events
	if msg.Kind != "digest" {
		evs = []ev{msg.ev}
	}
	for _, e := range evs {
		h := hookEvent{EventID: e.EventID, Kind: e.Kind, Body: string(body)}
		if e.Job != nil {
			h.JobID = e.Job.ID
		}
		r.events = append(r.events, h)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) setFailing(f bool) {
	r.mu.Lock()
	r.failing = f
	r.mu.Unlock()
}

// has reports whether an event of kind about job arrived.
func (r *receiver) has(job, kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e hookEvent) bool { return e.JobID == job && e.Kind == kind })
}

// snapshot returns what arrived so far.
func (r *receiver) snapshot() (posts int, events []hookEvent, badSig []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts, slices.Clone(r.events), slices.Clone(r.badSig)
}

// TestNotifyWebhook: a webhook registered with corral notify gets every
// expected event of jobs that complete, fail, are preempted and are
// canceled, at least once, signed, with no env value in any body, across
// a kill -9 of the server while the deliveries were failing; a burst of
// 100 job ends arrives as a handful of digests.
func TestNotifyWebhook(t *testing.T) {
	const secret = "whsec-e2e-0123456789"
	const envValue = "hf_e2e_s3cr3t_value_42"
	rcv := newReceiver(t, secret)
	hookURL := rcv.URL + "/hooks/pathsecret-7d1e"
	dir, port := t.TempDir(), freePort(t)
	args := []string{"up", "--simulate-gpus", "8", "--node-name", "e2e-node",
		"--notify-digest-window", "10s", "--notify-retry-backoff", "300ms", "--public-url", "http://dash.example",
		"--notify-allow-local"} // the receiver is on 127.0.0.1
	s := startControl(t, dir, port, nil, args...)
	env := []string{"CORRAL_SERVER=" + s.URL}

	// 1. The endpoint: its URL and secret are shown once, then redacted.
	out, errOut, code := runCLI(t, env, "notify", "add", "webhook", hookURL, "--secret", secret, "-o", "json")
	if code != 0 {
		t.Fatalf("notify add: %d %s", code, errOut)
	}
	var ep api.Endpoint
	if err := json.Unmarshal([]byte(out), &ep); err != nil || ep.URL != hookURL || ep.Secret != secret {
		t.Fatalf("notify add answered %s (%v)", out, err)
	}
	out, _, code = runCLI(t, env, "notify", "list")
	if code != 0 || !strings.Contains(out, ep.ID) || strings.Contains(out, "pathsecret") || strings.Contains(out, secret) {
		t.Fatalf("notify list: %d\n%s", code, out)
	}
	if out, errOut, code := runCLI(t, env, "notify", "test", ep.ID); code != 0 || !strings.Contains(out, "delivered") {
		t.Fatalf("notify test: %d %s %s", code, out, errOut)
	}
	if _, evs, _ := rcv.snapshot(); len(evs) != 1 || evs[0].Kind != "test" {
		t.Fatalf("the receiver got %+v after notify test", evs)
	}
	if logs := s.out.String(); strings.Contains(logs, "pathsecret") || strings.Contains(logs, secret) {
		t.Fatalf("the server's log shows the endpoint's URL or secret:\n%s", logs)
	}

	// 2. A job preempted and requeued (then canceled while queued).
	s.setPolicies(map[string]any{"preemption": true, "min_run_time": 0, "preempt_grace": "1s"})
	low := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 8, "priority": "low", "notify": "all", "env": map[string]string{"HF_TOKEN": envValue}})
	s.waitState(low.ID, api.StateRunning, 30*time.Second)
	high := s.submit(map[string]any{"command": "sleep 2", "gpu_count": 8, "priority": "critical", "notify": "none"})
	s.waitJob(low.ID, 30*time.Second, "to be preempted", func(j api.Job) bool { return j.Preemptions > 0 })
	s.do("DELETE", "/queue/"+low.ID, nil, nil)
	s.waitTerminal(low.ID, 30*time.Second)
	s.waitTerminal(high.ID, 30*time.Second)
	s.setPolicies(map[string]any{"preemption": false})

	// 3. With the receiver down: a job that completes, one that fails
	// (printing its env value), one canceled while running.
	rcv.setFailing(true)
	jobEnv := map[string]string{"HF_TOKEN": envValue}
	ok := s.submit(map[string]any{"name": "ok-job", "command": "echo fine", "gpu_count": 1, "notify": "all", "env": jobEnv})
	bad := s.submit(map[string]any{"name": "bad-job", "command": "for i in $(seq 1 12); do echo line $i; done; echo token=$HF_TOKEN; exit 3",
		"gpu_count": 2, "notify": "all", "env": jobEnv})
	canceled := s.submit(map[string]any{"name": "cancel-job", "command": "sleep 300", "gpu_count": 1, "notify": "all", "env": jobEnv})
	s.waitState(ok.ID, api.StateCompleted, 30*time.Second)
	s.waitState(bad.ID, api.StateFailed, 30*time.Second)
	s.waitState(canceled.ID, api.StateRunning, 30*time.Second)
	s.do("DELETE", "/queue/"+canceled.ID, nil, nil)
	s.waitState(canceled.ID, api.StateCanceled, 30*time.Second)
	// Deliveries are failing: wait until the log shows them pending
	// after a refused try, then kill -9.
	var l api.NotificationList
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("pending notifications tried: %+v", l.Notifications) }, func() bool {
		s.mustJSON("GET", "/notifications?state=pending", nil, http.StatusOK, &l)
		tried := 0
		for _, n := range l.Notifications {
			if n.Attempts > 0 {
				tried++
			}
		}
		return len(l.Notifications) >= 6 && tried > 0
	})
	s.kill9()
	first := s
	s = startControl(t, dir, port, nil, args...)
	rcv.setFailing(false)

	want := map[string][]string{
		low.ID:      {"job.began", "job.preempted", "job.canceled"},
		ok.ID:       {"job.began", "job.completed"},
		bad.ID:      {"job.began", "job.failed"},
		canceled.ID: {"job.began", "job.canceled"},
	}
	waitFor(t, 90*time.Second, func() string {
		_, evs, _ := rcv.snapshot()
		return fmt.Sprintf("every expected event; got %d events: %+v", len(evs), kinds(evs))
	}, func() bool {
		for job, ks := range want {
			for _, k := range ks {
				if !rcv.has(job, k) {
					return false
				}
			}
		}
		return true
	})
	posts, evs, badSig := rcv.snapshot()
	if len(badSig) > 0 {
		t.Errorf("%d POSTs had a bad signature: %s", len(badSig), truncate(badSig[0], 300))
	}
	for _, e := range evs {
		if strings.Contains(e.Body, envValue) {
			t.Fatalf("a notification carries the job's env value: %s", truncate(e.Body, 600))
		}
	}
	// The failure says what a person needs: exit code, log tail (the env
	// value cut out), GPUs, the dashboard link.
	var failBody string
	for _, e := range evs {
		if e.JobID == bad.ID && e.Kind == "job.failed" {
			failBody = e.Body
		}
	}
	for _, w := range []string{`"exit_code":3`, "line 12", "[redacted]", "http://dash.example/#/jobs/" + bad.ID, "bad-job", `"gpus":2`} {
		if !strings.Contains(failBody, w) {
			t.Errorf("the failure's notification lacks %q: %s", w, truncate(failBody, 1500))
		}
	}
	if strings.Contains(failBody, `"line 2"`) {
		t.Errorf("the failure's log tail is longer than 10 lines: %s", truncate(failBody, 1500))
	}
	if out, _, code := runCLI(t, env, "notify", "log", "--state", "delivered"); code != 0 || !strings.Contains(out, "job.failed") && !strings.Contains(out, "failed") {
		t.Errorf("notify log: %d\n%s", code, out)
	}

	// 4. A burst: 100 job ends become a handful of messages.
	before := posts
	var burst []string
	for i := range 100 {
		j := s.submit(map[string]any{"name": fmt.Sprintf("burst-%d", i), "command": "true", "gpu_count": 1, "notify": "end"})
		burst = append(burst, j.ID)
	}
	waitFor(t, 120*time.Second, func() string {
		_, evs, _ := rcv.snapshot()
		return fmt.Sprintf("100 job.completed events; got %d events in all", len(evs))
	}, func() bool {
		for _, id := range burst {
			if !rcv.has(id, "job.completed") {
				return false
			}
		}
		return true
	})
	for _, p := range []*server{first, s} {
		if logs := p.out.String(); strings.Contains(logs, "pathsecret") || strings.Contains(logs, secret) || strings.Contains(logs, envValue) {
			t.Errorf("the server's log shows the endpoint's URL path, its secret or an env value")
		}
	}
	posts, _, _ = rcv.snapshot()
	if n := posts - before; n > 12 {
		t.Errorf("100 job ends arrived in %d POSTs, want a handful (at most 12)", n)
	} else {
		t.Logf("100 job ends arrived in %d POSTs", n)
	}
}

// kinds sums up events for a failure message.
func kinds(evs []hookEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.JobID+":"+e.Kind)
	}
	return out
}

// TestNotifyBadInput: bad notification input is refused naming its field
// (API: 422 with field; CLI: exit 2) and changes nothing.
func TestNotifyBadInput(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, c := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/queue/submit", map[string]any{"command": "true", "notify": "sometimes"}, "notify"},
		{"/queue/submit", map[string]any{"command": "true", "notify": "all,begin"}, "notify"},
		{"/notify/endpoints", map[string]any{"kind": "pager", "url": "https://x.example.com"}, "kind"},
		{"/notify/endpoints", map[string]any{"kind": "webhook", "url": "https://x.example.com"}, "secret"},
		{"/notify/endpoints", map[string]any{"kind": "slack", "url": "ftp://x.example.com"}, "url"},
		{"/notify/endpoints", map[string]any{"kind": "email", "address": "nobody"}, "address"},
		{"/notify/endpoints", map[string]any{"kind": "slack", "url": "https://x.example.com", "scope": "galaxy"}, "scope"},
	} {
		r := s.do("POST", c.path, c.body, nil)
		if r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != c.field {
			t.Errorf("POST %s %v: %s, want 422 naming %s", c.path, c.body, r, c.field)
		}
	}
	if r := s.do("GET", "/notifications?state=lost", nil, nil); r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != "state" {
		t.Errorf("GET /notifications?state=lost: %s", r)
	}
	if r := s.do("DELETE", "/notify/endpoints/ne_nope", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("DELETE an unknown endpoint: %s", r)
	}
	for _, args := range [][]string{
		{"submit", "--notify", "sometimes", "--", "true"},
		{"notify", "add", "pager", "https://x.example.com"},
		{"notify", "add", "webhook", "https://x.example.com"},
		{"notify", "add", "slack"},
		{"notify", "log", "--state", "lost"},
	} {
		if _, errOut, code := runCLI(t, env, args...); code != 2 {
			t.Errorf("corral %v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	var l api.EndpointList
	s.mustJSON("GET", "/notify/endpoints", nil, http.StatusOK, &l)
	if len(l.Endpoints) != 0 || len(s.jobs()) != 0 {
		t.Errorf("refused input changed something: %d endpoints, %d jobs", len(l.Endpoints), len(s.jobs()))
	}
}

// hasKind reports whether an event of kind arrived.
func (r *receiver) hasKind(kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e hookEvent) bool { return e.Kind == kind })
}

// TestNotifyNodeLost: with `corral server` and an agent, killing the agent
// tells the cluster's endpoint the node is down (and back when the agent
// returns), and the job's owner that the job was lost with its node and
// requeued.
func TestNotifyNodeLost(t *testing.T) {
	const secret = "whsec-node-lost-42"
	rcv := newReceiver(t, secret)
	s := startCluster(t, "--notify-allow-local") // the receiver is on 127.0.0.1
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, scope := range []string{"user", "cluster"} {
		if _, errOut, code := runCLI(t, env, "notify", "add", "webhook", rcv.URL+"/"+scope, "--secret", secret, "--scope", scope); code != 0 {
			t.Fatalf("notify add --scope %s: %s", scope, errOut)
		}
	}
	a := startAgent(t, s, "n1", 2)
	j := s.submit(map[string]any{"command": "sleep 300", "gpu_count": 1, "max_retries": 1})
	s.waitState(j.ID, api.StateRunning, 20*time.Second)
	a.kill9()
	s.waitNode("n1", "down", clusterTTL+5*time.Second)
	waitFor(t, 30*time.Second, func() string {
		_, evs, _ := rcv.snapshot()
		return fmt.Sprintf("alert.node_down and job.lost; got %v", kinds(evs))
	}, func() bool { return rcv.hasKind("alert.node_down") && rcv.has(j.ID, "job.lost") })
	a.start()
	waitFor(t, 30*time.Second, func() string {
		_, evs, _ := rcv.snapshot()
		return fmt.Sprintf("alert.node_up; got %v", kinds(evs))
	}, func() bool { return rcv.hasKind("alert.node_up") })
	s.do("DELETE", "/queue/"+j.ID, nil, nil)
	if _, _, bad := rcv.snapshot(); len(bad) > 0 {
		t.Errorf("%d POSTs had a bad signature", len(bad))
	}
}
