package main

import (
	"encoding/json"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// TestListingsHonourJSON: every command that lists or shows something
// prints JSON that parses with -o json, and nothing else on stdout.
func TestListingsHonourJSON(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/queue", 200, sampleQueue())
	f.on("GET", "/jobs", 200, api.JobList{Jobs: []api.Job{sampleJob()}})
	f.on("GET", "/jobs/01J", 200, sampleJob())
	f.on("GET", "/cluster/gpu-status", 200, sampleCluster())
	f.on("GET", "/orchestrator/policies", 200, api.Policies{Policy: "fcfs"})
	f.on("GET", "/orchestrator/status", 200, api.OrchestratorStatus{Running: true, Policy: "fcfs"})
	f.on("GET", "/auth/tokens", 200, api.TokenList{Tokens: []api.Token{{ID: "t1", User: "ana", Role: api.RoleUser}}})
	f.on("GET", "/auth/whoami", 200, api.Whoami{User: "ana", Role: api.RoleUser})
	f.on("GET", "/audit", 200, api.AuditList{Entries: []api.AuditEntry{{User: "ana", Action: "job.submit"}}})
	f.on("GET", "/usage", 200, usage.Report{})
	f.on("GET", "/prices", 200, usage.PriceList{})
	f.on("GET", "/budgets", 200, usage.BudgetList{})
	f.on("GET", "/reservations", 200, api.ReservationList{Reservations: []api.Reservation{{Name: "demo", GPUs: 1}}})
	f.on("GET", "/reservations/demo", 200, api.Reservation{Name: "demo", GPUs: 1})
	f.on("GET", "/notify/endpoints", 200, api.EndpointList{})
	f.on("GET", "/notifications", 200, api.NotificationList{})
	f.on("GET", "/notify/defaults", 200, api.NotifyDefaults{User: "ana"})
	f.on("GET", "/arrays/j01karray", 200, api.Array{ID: testArrayID, Priority: api.PriorityNormal})
	f.on("GET", "/advise", 200, api.LoadProfile{})
	for _, args := range [][]string{
		{"queue"}, {"queue", "-A", "--state", "running"}, {"jobs"}, {"jobs", "-A"}, {"show", "01J"},
		{"nodes"}, {"policy", "get"}, {"policy"}, {"quota", "list"}, {"orchestrator", "status"},
		{"token", "list"}, {"whoami"}, {"audit"}, {"usage"}, {"price", "list"}, {"budget", "list"},
		{"reserve", "list"}, {"reserve", "show", "demo"}, {"notify", "list"}, {"notify", "log"}, {"notify", "defaults"},
		{"array", "show", "j01karray"}, {"advise"},
		{"quota"}, {"weight"}, {"weight", "list"}, {"price"}, {"budget"}, {"orchestrator"},
		{"jobs", "--all"}, {"queue", "j01karray"}, {"queue", "--state", "queued"}, {"version"},
	} {
		res := f.run(append([]string{"-o", "json"}, args...)...)
		if res.code != 0 {
			t.Errorf("%v: exit %d: %s", args, res.code, res.stderr)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
			t.Errorf("%v -o json: not JSON (%v):\n%s", args, err, res.stdout)
		}
	}
}
