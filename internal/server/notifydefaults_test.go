package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// TestNotifyDefaultsRoutes: GET and PUT /notify/defaults act on the
// caller's own defaults; only admins name another user (?user=); a bad
// value is a 422 naming notify and changes nothing; default goes back to
// the built-in ones; every PUT, refused or not, is audited as
// notify.defaults with its user as the target.
func TestNotifyDefaultsRoutes(t *testing.T) {
	e := newAuthEnv(t)
	get := func(caller, query string) api.NotifyDefaults {
		t.Helper()
		resp, b := e.do(caller, "GET", "/notify/defaults"+query, "", nil)
		var d api.NotifyDefaults
		if err := json.Unmarshal(b, &d); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /notify/defaults%s as %s: %d %s", query, caller, resp.StatusCode, b)
		}
		return d
	}
	if d := get("owner", ""); d.User != "alice" || !d.Builtin || d.Notify != "" {
		t.Fatalf("alice's before any: %+v", d)
	}
	cases := []struct {
		name, caller, query, body string
		status                    int
		field                     string
	}{
		{"unknown class", "owner", "", `{"notify":"begin,sometimes"}`, 422, "notify"},
		{"empty", "owner", "", `{"notify":""}`, 422, "notify"},
		{"missing", "owner", "", `{}`, 422, "notify"},
		{"all with another", "owner", "", `{"notify":"all,begin"}`, 422, "notify"},
		{"not a string", "owner", "", `{"notify":5}`, 422, "notify"},
		{"unknown field", "owner", "", `{"notify":"begin","user":"bob"}`, 400, "user"},
		{"another user's, as a user", "owner", "?user=bob", `{"notify":"begin"}`, 403, "user"},
		{"another user's, as a project admin", "projadmin", "?user=alice", `{"notify":"begin"}`, 403, "user"},
		{"a bad user name, as an admin", "admin", "?user=a%20b", `{"notify":"begin"}`, 422, "user"},
		{"a viewer", "viewer", "", `{"notify":"begin"}`, 403, ""},
	}
	for _, c := range cases {
		resp, b := e.do(c.caller, "PUT", "/notify/defaults"+c.query, c.body, nil)
		var eb api.ErrorBody
		json.Unmarshal(b, &eb)
		if resp.StatusCode != c.status || eb.Error.Field != c.field {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, resp.StatusCode, b, c.status, c.field)
		}
	}
	if resp, _ := e.do("owner", "GET", "/notify/defaults?user=bob", "", nil); resp.StatusCode != 403 {
		t.Errorf("alice read bob's defaults: %d", resp.StatusCode)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if d := e.notify.Endpoints.Defaults(u); !d.Builtin {
			t.Errorf("refused calls set %s's defaults: %+v", u, d)
		}
	}

	// Set, normalized; read back; an admin sets bob's; reset.
	resp, b := e.do("owner", "PUT", "/notify/defaults", `{"notify":"End, begin"}`, nil)
	var d api.NotifyDefaults
	if err := json.Unmarshal(b, &d); err != nil || resp.StatusCode != 200 || d.Notify != "begin,end" || d.Builtin || d.UpdatedBy != "alice" {
		t.Fatalf("alice sets hers: %d %s", resp.StatusCode, b)
	}
	if d := get("owner", ""); d.Notify != "begin,end" || d.UpdatedAt == nil {
		t.Errorf("alice's after setting: %+v", d)
	}
	resp, b = e.do("admin", "PUT", "/notify/defaults?user=bob", `{"notify":"none"}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("the admin sets bob's: %d %s", resp.StatusCode, b)
	}
	if d := get("other", ""); d.User != "bob" || d.Notify != "none" || d.UpdatedBy == "bob" || d.UpdatedBy == "" {
		t.Errorf("bob's, set by the admin: %+v", d)
	}
	if d := get("admin", "?user=alice"); d.Notify != "begin,end" {
		t.Errorf("alice's, read by the admin: %+v", d)
	}
	if d := get("owner", ""); d.Notify != "begin,end" {
		t.Errorf("bob's change touched alice's: %+v", d)
	}
	resp, b = e.do("owner", "PUT", "/notify/defaults", `{"notify":"default"}`, nil)
	if err := json.Unmarshal(b, &d); err != nil || resp.StatusCode != 200 || !d.Builtin || d.Notify != "" {
		t.Errorf("alice resets hers: %d %s", resp.StatusCode, b)
	}

	entries, err := e.a.Audit(context.Background(), store.AuditFilter{Action: "notify.defaults"})
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused int
	for _, en := range entries {
		switch {
		case en.Status == 200 && (en.Target == "alice" || en.Target == "bob"):
			ok++
		case en.Status == 403 && en.User == "alice" && en.Target == "":
			refused++ // alice naming bob: refused before a target was set
		}
	}
	if ok != 3 || refused != 1 {
		t.Errorf("notify.defaults audit rows: %d set, %d refused of alice's, want 3 and 1: %+v", ok, refused, entries)
	}
}
