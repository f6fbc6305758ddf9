package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestVersion(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/orchestrator/status", 200, api.OrchestratorStatus{Version: "9.9.9-test"})
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := f.run(args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "client: corral "+version) ||
			!strings.Contains(r.stdout, "server: corral 9.9.9-test at ") {
			t.Errorf("corral %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	r := f.run("version", "--client")
	if r.code != 0 || strings.Contains(r.stdout, "server") {
		t.Errorf("corral version --client: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = f.run("-o", "json", "version")
	var v versionInfo
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Client != version || v.Server != "9.9.9-test" {
		t.Errorf("corral -o json version: %v %+v\n%s", err, v, r.stdout)
	}
	// No server: the client's version all the same, and why not the server's.
	r = runArgs("--server", "http://127.0.0.1:1", "version")
	if r.code != 0 || !strings.Contains(r.stdout, "client: corral ") || !strings.Contains(r.stdout, "server: unknown (") {
		t.Errorf("corral version without a server: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
