package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestNotifyDefaults: a user's own notification defaults, with the real
// binary. ana sets begin as hers with corral notify defaults: her job with
// no --notify sends job.began to her webhook, one with --notify none does
// not, and her default survives a restart of the server. bob has set none:
// his job's begin is not sent (the built-in defaults), its failure is.
// Bad values and another user's defaults are refused and change nothing.
func TestNotifyDefaults(t *testing.T) {
	const secret = "whsec-defaults-0123"
	anaHook, bobHook := newReceiver(t, secret), newReceiver(t, secret)
	dir, port := t.TempDir(), freePort(t)
	args := []string{"up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--notify-retry-backoff", "300ms", "--notify-allow-local"} // receivers on 127.0.0.1
	s := startControl(t, dir, port, nil, args...)
	anaTok, bobTok := s.apiToken("ana", api.RoleUser).Secret, s.apiToken("bob", api.RoleUser).Secret
	as := func(tok string, args ...string) (string, string, int) {
		return runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + tok}, args...)
	}
	mustCLI := func(tok string, args ...string) string {
		t.Helper()
		out, errOut, code := as(tok, args...)
		if code != 0 {
			t.Fatalf("corral %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	submit := func(tok string, args ...string) api.Job {
		t.Helper()
		var j api.Job
		out := mustCLI(tok, append([]string{"submit", "-o", "json", "--gpus", "1"}, args...)...)
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("submit answered %q: %v", out, err)
		}
		return j
	}
	mustCLI(anaTok, "notify", "add", "webhook", anaHook.URL+"/ana", "--secret", secret)
	mustCLI(bobTok, "notify", "add", "webhook", bobHook.URL+"/bob", "--secret", secret)

	// Before: the built-in defaults.
	if out := mustCLI(anaTok, "notify", "defaults"); !strings.Contains(out, "ana: the built-in defaults") {
		t.Errorf("ana's defaults before any: %q", out)
	}
	// Refused: bad classes (a usage error, and a 422 naming notify from
	// the API), another user's defaults.
	for _, a := range [][]string{{"notify", "defaults", "sometimes"}, {"notify", "defaults", "all,begin"}, {"notify", "defaults", "begin", "--reset"}} {
		if _, errOut, code := as(anaTok, a...); code != 2 {
			t.Errorf("corral %v: exit %d, want 2 (%s)", a, code, errOut)
		}
	}
	if _, errOut, code := as(anaTok, "notify", "defaults", "none", "--user", "bob"); code == 0 || !strings.Contains(errOut, "admin") {
		t.Errorf("ana set bob's defaults: exit %d %s", code, errOut)
	}
	r, err := s.send("PUT", "/notify/defaults", map[string]any{"notify": "begin,often"}, map[string]string{"Authorization": "Bearer " + anaTok})
	if err != nil || r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != "notify" {
		t.Errorf("PUT a bad value: %s %v, want 422 naming notify", r, err)
	}
	var d api.NotifyDefaults
	s.mustJSON("GET", "/notify/defaults?user=ana", nil, http.StatusOK, &d)
	if !d.Builtin {
		t.Fatalf("refused calls set ana's defaults: %+v", d)
	}

	// ana sets begin.
	if out := mustCLI(anaTok, "notify", "defaults", "Begin"); !strings.Contains(out, "ana: begin (set by ana") {
		t.Errorf("corral notify defaults Begin: %q", out)
	}
	anaJob := submit(anaTok, "--", "true")
	anaQuiet := submit(anaTok, "--notify", "none", "--", "true")
	bobJob := submit(bobTok, "--", "exit 3")
	s.waitState(anaJob.ID, api.StateCompleted, 30*time.Second)
	s.waitState(anaQuiet.ID, api.StateCompleted, 30*time.Second)
	s.waitState(bobJob.ID, api.StateFailed, 30*time.Second)
	waitFor(t, 30*time.Second, func() string {
		_, a, _ := anaHook.snapshot()
		_, b, _ := bobHook.snapshot()
		return fmt.Sprintf("ana's job.began and bob's job.failed; ana got %v, bob %v", kinds(a), kinds(b))
	}, func() bool { return anaHook.has(anaJob.ID, "job.began") && bobHook.has(bobJob.ID, "job.failed") })

	// What was routed is in the outbox with the change that caused it: the
	// jobs have ended, so every row of theirs is there.
	var l api.NotificationList
	s.mustJSON("GET", "/notifications?limit=1000", nil, http.StatusOK, &l)
	routed := map[string]bool{}
	for _, n := range l.Notifications {
		routed[n.JobID+" "+n.Kind] = true
	}
	for key, want := range map[string]bool{
		anaJob.ID + " job.began":     true,  // her default
		anaJob.ID + " job.completed": false, // her default says begin only
		anaQuiet.ID + " job.began":   false, // the job's own --notify none
		bobJob.ID + " job.began":     false, // bob has no default of his own: built-in
		bobJob.ID + " job.failed":    true,
	} {
		if routed[key] != want {
			t.Errorf("%s routed: %v, want %v (rows: %v)", key, routed[key], want, routed)
		}
	}
	if bobHook.has(bobJob.ID, "job.began") || anaHook.has(anaQuiet.ID, "job.began") {
		t.Errorf("a begin was sent that no default asked for")
	}

	// Her default is kept across a restart and still applies.
	s.stop()
	s = startControl(t, dir, port, nil, args...)
	if out := mustCLI(anaTok, "notify", "defaults", "-o", "json"); !strings.Contains(out, `"notify": "begin"`) && !strings.Contains(out, `"notify":"begin"`) {
		t.Errorf("ana's defaults after a restart: %q", out)
	}
	again := submit(anaTok, "--", "true")
	waitFor(t, 30*time.Second, func() string { return "job.began of ana's job after the restart" }, func() bool { return anaHook.has(again.ID, "job.began") })

	// --reset: the built-in defaults again.
	if out := mustCLI(anaTok, "notify", "defaults", "--reset"); !strings.Contains(out, "built-in") {
		t.Errorf("corral notify defaults --reset: %q", out)
	}
	s.mustJSON("GET", "/notify/defaults?user=ana", nil, http.StatusOK, &d)
	if !d.Builtin {
		t.Errorf("after --reset: %+v", d)
	}
}
