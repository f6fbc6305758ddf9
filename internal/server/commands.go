package server

import "fmt"

// routeCommands names the corral command that calls each route a role may
// be refused (user and admin routes), so that a refusal says what the
// person ran, not the route it called: "corral price set needs the admin
// role", not "PUT /prices/{model} needs ...". Routes only the dashboard
// calls name what it does. TestRouteCommands checks that every user and
// admin route has one.
var routeCommands = map[string]string{
	"POST /queue/submit":                        "corral submit (or run, alloc, notebook)",
	"DELETE /queue/{job_id}":                    "corral cancel",
	"PATCH /queue/{job_id}/priority":            "corral priority",
	"PATCH /queue/{job_id}/dependency":          "corral depend",
	"POST /cluster/nodes/{node_id}/{action}":    "corral nodes cordon, drain or uncordon",
	"POST /cluster/gpu-allocate":                "corral hold",
	"POST /cluster/gpu-release":                 "corral release",
	"POST /orchestrator/start":                  "corral orchestrator start",
	"POST /orchestrator/stop":                   "corral orchestrator stop",
	"PUT /orchestrator/policies":                "corral policy set (and corral quota, corral weight)",
	"POST /auth/tokens":                         "corral token create",
	"POST /auth/invites":                        "corral user add",
	"POST /auth/device/approve":                 "the dashboard's device sign-in page",
	"GET /auth/tokens":                          "corral token list",
	"DELETE /auth/tokens/{id}":                  "corral token revoke",
	"GET /audit":                                "corral audit",
	"GET /notify/endpoints":                     "corral notify list",
	"POST /notify/endpoints":                    "corral notify add",
	"DELETE /notify/endpoints/{endpoint_id}":    "corral notify remove",
	"POST /notify/endpoints/{endpoint_id}/test": "corral notify test",
	"GET /notifications":                        "corral notify log",
	"GET /notify/defaults":                      "corral notify defaults",
	"PUT /notify/defaults":                      "corral notify defaults CLASSES",
	"PATCH /arrays/{array_id}":                  "corral array throttle",
	"DELETE /arrays/{array_id}":                 "corral cancel ARRAYID",
	"GET /jobs/{job_id}/shell":                  "corral shell",
	"POST /reservations":                        "corral reserve create",
	"PATCH /reservations/{name}":                "corral reserve update",
	"DELETE /reservations/{name}":               "corral reserve delete",
	"PUT /prices/{model}":                       "corral price set",
	"DELETE /prices/{model}":                    "corral price unset",
	"PUT /budgets/{kind}/{name}":                "corral budget set",
	"POST /budgets/{kind}/{name}/release":       "corral budget release",
	"DELETE /budgets/{kind}/{name}":             "corral budget unset",
}

// roleRefusal is the message of a 403 for a caller whose role is below
// the route's: it names the command (the route where none calls it).
func roleRefusal(rt route, who, has, needs string) string {
	if cmd, ok := routeCommands[rt.method+" "+rt.path]; ok {
		return fmt.Sprintf("%s needs the %s role; the token of %s has the %s role", cmd, needs, who, has)
	}
	return fmt.Sprintf("%s %s needs the %s role; the token of %s has the %s role", rt.method, rt.path, needs, who, has)
}
