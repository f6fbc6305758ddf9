package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The black-box tests of what the API lets leak or linger: env values
// over every route, streams past their token, bodies encoding/json would
// rewrite, and sign-in links.

// envSecret is the env value the tests plant in a job of alice's.
const envSecret = "hf_e2e_s3cret_4b1d"

// apiToken makes a token through the API and returns it.
func (s *server) apiToken(user string, role api.Role) api.NewToken {
	s.t.Helper()
	var nt api.NewToken
	s.mustJSON("POST", "/auth/tokens", map[string]any{"user": user, "role": role}, http.StatusCreated, &nt)
	return nt
}

// streamAs opens a streaming GET as the token's holder and reads up to its
// first event (an event stream) or its headers (a log); the channel
// yields the rest once the stream ends.
func (s *server) streamAs(path, token string) <-chan string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a fail-safe
	s.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	first := ""
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		for !strings.HasPrefix(first, "data: ") {
			if first, err = br.ReadString('\n'); err != nil {
				s.t.Fatalf("GET %s ended before its first event: %v", path, err)
			}
		}
	}
	rest := make(chan string, 2)
	rest <- first
	go func() {
		defer resp.Body.Close()
		b, _ := io.ReadAll(br)
		rest <- string(b)
	}()
	return rest
}

// TestSecurityEnvHiddenFromOthers: alice's env value reaches no one who
// may not act on her job, over the event stream, the job routes and the
// CLI; alice and admins see it.
func TestSecurityEnvHiddenFromOthers(t *testing.T) {
	s := startServer(t)
	viewer := s.apiToken("vera", api.RoleViewer)
	bob := s.apiToken("bob", api.RoleUser)
	alice := s.apiToken("alice", api.RoleUser)
	run := s.submit(map[string]any{"user": "alice", "command": "sleep 60", "gpu_count": 1, "env": map[string]string{"HF_TOKEN": envSecret}})
	s.waitState(run.ID, api.StateRunning, 30*time.Second)
	queued := s.submit(map[string]any{"user": "alice", "command": "true", "gpu_count": 8, "env": map[string]string{"HF_TOKEN": envSecret}})
	t.Cleanup(func() {
		s.do("DELETE", "/queue/"+run.ID, nil, nil)
		s.do("DELETE", "/queue/"+queued.ID, nil, nil)
	})
	for _, tc := range []struct {
		who    string
		token  string
		mayAct bool
	}{
		{"viewer", viewer.Secret, false},
		{"another user", bob.Secret, false},
		{"the owner", alice.Secret, true},
		{"an admin", adminToken, true},
	} {
		t.Run(tc.who, func(t *testing.T) {
			s := s.on(t)
			bodies := map[string]string{}
			first := <-s.streamAs("/events", tc.token)
			if !strings.Contains(first, run.ID) {
				t.Fatalf("the first event lacks the running job: %s", truncate(first, 300))
			}
			bodies["GET /events"] = first
			for _, path := range []string{"/jobs", "/jobs/" + run.ID, "/jobs/" + queued.ID, "/queue"} {
				r := s.do("GET", path, nil, map[string]string{"Authorization": "Bearer " + tc.token})
				if r.Status != http.StatusOK {
					t.Fatalf("GET %s: %s", path, r)
				}
				bodies["GET "+path] = string(r.Body)
			}
			stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + tc.token}, "show", "--env", run.ID)
			if code != 0 {
				t.Fatalf("corral show: exit %d %s", code, stderr)
			}
			bodies["corral show"] = stdout
			for where, body := range bodies {
				has := strings.Contains(body, envSecret)
				if has != tc.mayAct && (where != "GET /queue" || has) {
					t.Errorf("%s as %s: shows the env value %v, want %v: %s", where, tc.who, has, tc.mayAct, truncate(body, 300))
				}
			}
		})
	}
}

// TestSecurityRevokedTokenEndsStreams: revoking a token ends, within a
// second, the event stream and the followed log it had open.
func TestSecurityRevokedTokenEndsStreams(t *testing.T) {
	s := startServer(t)
	j := s.submit(map[string]any{"command": "while true; do echo tick; sleep 0.2; done", "gpu_count": 1})
	t.Cleanup(func() { s.do("DELETE", "/queue/"+j.ID, nil, nil) })
	s.waitState(j.ID, api.StateRunning, 30*time.Second)
	v := s.apiToken("vera", api.RoleViewer)
	events := s.streamAs("/events", v.Secret)
	<-events // the first event
	logs := s.streamAs("/jobs/"+j.ID+"/logs?follow=true", v.Secret)
	<-logs
	// `corral logs -f` as the same token, once it has printed output.
	cli := exec.Command(corralBin, "logs", "-f", j.ID)
	cli.Env = cleanEnv("CORRAL_SERVER="+s.URL, "CORRAL_TOKEN="+v.Secret, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "client.json"))
	stdout, err := cli.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cli.Stderr = &stderr
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Process.Kill() })
	out := bufio.NewReader(stdout)
	if _, err := out.ReadString('\n'); err != nil {
		t.Fatalf("corral logs -f printed nothing: %v %s", err, stderr.String())
	}
	cliDone := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, out)
		cliDone <- cli.Wait()
	}()
	s.mustJSON("DELETE", "/auth/tokens/"+v.ID, nil, http.StatusOK, nil)
	deadline := time.After(time.Second)
	for name, ch := range map[string]<-chan string{"GET /events": events, "GET /jobs/{id}/logs?follow=true": logs} {
		select {
		case rest := <-ch:
			if name == "GET /events" && !strings.Contains(rest, `"token_revoked"`) {
				t.Errorf("the event stream ended without saying why: %s", truncate(rest, 300))
			}
		case <-deadline:
			t.Fatalf("%s still streams a second after its token was revoked", name)
		}
	}
	// The CLI exits with an error that says why (its process may take a
	// moment longer to exit than the stream to end).
	select {
	case err := <-cliDone:
		if err == nil || !strings.Contains(stderr.String(), "revoked") {
			t.Errorf("corral logs -f after the revocation: %v, stderr %q; want a failure that says the token was revoked", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("corral logs -f still runs 5s after its token was revoked")
	}
	// And the token is refused from then on.
	if r := s.do("GET", "/events", nil, map[string]string{"Authorization": "Bearer " + v.Secret}); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET /events with the revoked token: %s", r)
	}
}

// TestSecurityBadInputRefused: what encoding/json would let through or
// rewrite is refused with the field named, and changes nothing.
func TestSecurityBadInputRefused(t *testing.T) {
	s := startServer(t)
	before := len(s.jobs())
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"invalid UTF-8 in the command", "POST", "/queue/submit", "{\"command\":\"echo \xff\xfe\",\"gpu_count\":0}", 422, "command"},
		{"invalid UTF-8 in an env value", "POST", "/queue/submit", "{\"command\":\"true\",\"env\":{\"K\":\"\xc3\x28\"}}", 422, "env.K"},
		{"invalid UTF-8 in the name", "POST", "/queue/submit", "{\"command\":\"true\",\"name\":\"\xe2\x82\"}", 422, "name"},
		{"a lone surrogate escape", "POST", "/queue/submit", `{"command":"echo \udc00"}`, 422, "command"},
		{"a duplicate key", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"gpu_count":8}`, 400, "gpu_count"},
		{"a duplicate user", "POST", "/queue/submit", `{"command":"true","user":"admin","user":"mallory"}`, 400, "user"},
		{"a duplicate env name", "POST", "/queue/submit", `{"command":"true","env":{"A":"1","A":"2"}}`, 400, "env.A"},
		{"a field's twin in another case", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"GPU_Count":8}`, 400, "GPU_Count"},
		{"a hold of 0 GPUs", "POST", "/cluster/gpu-allocate", `{"job_id":"nb","gpu_count":0}`, 422, "gpu_count"},
		{"a hold with a duplicate key", "POST", "/cluster/gpu-allocate", `{"job_id":"nb","gpu_count":1,"gpu_count":8}`, 400, "gpu_count"},
		{"a token with a duplicate role", "POST", "/auth/tokens", `{"user":"dan","role":"viewer","role":"admin"}`, 400, "role"},
		{"a query parameter not UTF-8", "GET", "/jobs?user=%ff", "", 422, "user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.on(t)
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := s.do(tc.method, tc.path, body, nil)
			if r.Status != tc.status {
				t.Fatalf("%s: want %d, got %s", tc.body, tc.status, r)
			}
			if e := errorBody(t, r); e.Field != tc.field {
				t.Errorf("the refusal names %q, want %q: %s", e.Field, tc.field, r)
			}
		})
	}
	if n := len(s.jobs()); n != before {
		t.Errorf("refused submissions made %d jobs", n-before)
	}
	if c := s.cluster(); c.AvailableGPUs != 8 {
		t.Errorf("a refused hold holds GPUs: %d of 8 available", c.AvailableGPUs)
	}
	// The CLI refuses a command that is not UTF-8 (JSON would carry it
	// rewritten), naming the field.
	_, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "submit", "--gpus", "0", "--", "echo \xff")
	if code == 0 || !strings.Contains(stderr, "command") || !strings.Contains(stderr, "UTF-8") {
		t.Errorf("corral submit of a command that is not UTF-8: exit %d, %s", code, stderr)
	}
}

// TestSecuritySignInLinkKeepsSession: opening a sign-in link sets no
// session and replaces none; only the dashboard's own POST, with its
// header and from its origin, signs in (no login CSRF).
func TestSecuritySignInLinkKeepsSession(t *testing.T) {
	s := startServer(t)
	mallory := s.apiToken("mallory", api.RoleUser)
	admin := map[string]string{"Authorization": "", "Cookie": "corral_session=" + adminToken}
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, cookie := range []string{"", admin["Cookie"]} {
		req, _ := http.NewRequest("GET", s.URL+"/?token="+mallory.Secret, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET /?token= (cookie %v): %d, Set-Cookie %q; want the page and no cookie", cookie != "", resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	}
	// Another site's form POST (text/plain, no dashboard header) cannot
	// sign anyone in, signed in or not.
	for _, h := range []map[string]string{
		{"Authorization": "", "Content-Type": "text/plain", "Origin": "https://evil.example"},
		{"Authorization": "", "Content-Type": "text/plain", "Origin": "https://evil.example", "Cookie": admin["Cookie"]},
		{"Authorization": "", "X-Corral-Request": "1", "Origin": "https://evil.example"},
	} {
		r := s.do("POST", "/auth/session", `{"token":"`+mallory.Secret+`"}`, h)
		if r.Status != http.StatusForbidden || r.Header.Get("Set-Cookie") != "" {
			t.Errorf("cross-site sign-in %v: %s, Set-Cookie %q", h, r, r.Header.Get("Set-Cookie"))
		}
	}
	// The dashboard's own call does.
	r := s.do("POST", "/auth/session", `{"token":"`+mallory.Secret+`"}`, map[string]string{"Authorization": "", "X-Corral-Request": "1", "Origin": s.URL})
	if r.Status != http.StatusOK || !strings.Contains(r.Header.Get("Set-Cookie"), "corral_session=") {
		t.Errorf("the dashboard's sign-in: %s, Set-Cookie %q", r, r.Header.Get("Set-Cookie"))
	}
}

// TestSecurityExpiredTokenEndsStreams: a token's expiry ends its open
// event stream at that time, not at its next request.
func TestSecurityExpiredTokenEndsStreams(t *testing.T) {
	s := startServer(t)
	var nt api.NewToken
	s.mustJSON("POST", "/auth/tokens", map[string]any{"user": "tim", "role": "viewer", "expires_in": "2s"}, http.StatusCreated, &nt)
	events := s.streamAs("/events", nt.Secret)
	<-events
	select {
	case rest := <-events:
		if time.Now().Before(*nt.ExpiresAt) {
			t.Errorf("the stream ended before the token expired")
		}
		if !strings.Contains(rest, `"token_expired"`) {
			t.Errorf("the event stream ended without saying why: %s", truncate(rest, 300))
		}
	case <-time.After(time.Until(*nt.ExpiresAt) + time.Second):
		t.Fatal("the event stream still runs a second after its token expired")
	}
}
