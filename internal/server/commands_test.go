package server

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestRouteCommands: every route a role may be refused names the command
// that calls it, and a refusal says that command, not the route.
func TestRouteCommands(t *testing.T) {
	e := newAuthEnv(t)
	s, _, _ := newHandler(t, idleExec{}, slog.New(slog.DiscardHandler))
	for _, rt := range s.routes {
		if rt.access != user && rt.access != admin {
			continue
		}
		if _, ok := routeCommands[rt.method+" "+rt.path]; !ok {
			t.Errorf("%s %s: no command in routeCommands", rt.method, rt.path)
		}
	}
	for _, tc := range []struct {
		caller, method, path, body, want string
	}{
		{"owner", "PUT", "/prices/H100", `{"dollars_per_hour":2}`, "corral price set needs the admin role; the token of alice has the user role"},
		{"viewer", "POST", "/queue/submit", `{"command":"true"}`, "corral submit (or run, alloc, notebook) needs the user role"},
		{"owner", "GET", "/audit", "", "corral audit needs the admin role"},
	} {
		resp, b := e.do(tc.caller, tc.method, tc.path, tc.body, nil)
		var eb api.ErrorBody
		_ = json.Unmarshal(b, &eb)
		if resp.StatusCode != 403 || !strings.Contains(eb.Error.Message, tc.want) || strings.Contains(eb.Error.Message, tc.path) {
			t.Errorf("%s %s %s: %d %q, want 403 saying %q", tc.caller, tc.method, tc.path, resp.StatusCode, eb.Error.Message, tc.want)
		}
	}
}
