package server

import (
	"slices"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/usage"
)

// routeDoc is what /openapi.json says about one route of the table
// (server.go, usage.go) beyond its method, path, summary and access: its
// query parameters, its request body's Go type and its answers' Go types.
// Schemas come from the types by reflection (openapi.go), so a field
// added to a type appears in the document by itself. TestOpenAPIRoutes
// fails for a route of the table that has no routeDoc, and for a routeDoc
// of no route.
type routeDoc struct {
	query   []param
	headers []param // request headers beyond Authorization
	body    any     // the request body: a zero value of its type; nil: none
	// optionalBody: the body may be left out.
	optionalBody bool
	answers      []answer
	errors       []int // error statuses beyond those every route of its kind may answer
	tag          string
}

// answer is one successful answer: a JSON body of body's type, or another
// media type (then body is nil or a string schema's description).
type answer struct {
	status int
	desc   string
	body   any    // a zero value of the JSON body's type; nil: no JSON body
	oneOf  []any  // instead of body: one of these types
	media  string // "": application/json; "-": none (a protocol switch)
	also   string // another media type the same answer may come in (a text form)
	// events: a text/event-stream's events, by name: a zero value of each
	// one's data (JSON).
	events map[string]any
}

// eventsEnded is the data of GET /events' last event, ended.
type eventsEnded struct {
	Reason string `json:"reason"` // token_revoked or token_expired
}

// param is a query parameter or a header.
type param struct {
	name, desc string
	schema     map[string]any
	repeated   bool // may be given several times (an array)
}

func strParam(name, desc string) param {
	return param{name: name, desc: desc, schema: map[string]any{"type": "string"}}
}

func intParam(name, desc string, min, max int) param {
	return param{name: name, desc: desc, schema: map[string]any{"type": "integer", "minimum": min, "maximum": max}}
}

func boolParam(name, desc string) param {
	return param{name: name, desc: desc, schema: map[string]any{"type": "boolean"}}
}

func sinceParam(name, desc string) param {
	return param{name: name, desc: desc + ": an RFC 3339 time (2026-11-22T09:00:00Z) or a duration back from now (2h, 90m, 3600)",
		schema: map[string]any{"type": "string"}}
}

func durationParam(name, desc string) param {
	return param{name: name, desc: desc + ": seconds or a duration such as 30s or 2m",
		schema: map[string]any{"type": "string"}}
}

func stateParam() param {
	states := make([]any, len(api.States))
	for i, s := range api.States {
		states[i] = string(s)
	}
	return param{name: "state", desc: "only jobs in this state", schema: map[string]any{"type": "string", "enum": states}}
}

func ok(body any) []answer { return []answer{{status: 200, body: body}} }

// nodeHistoryAnswer is GET /cluster/nodes/{node_id}/history's answer.
type nodeHistoryAnswer struct {
	NodeID  string                `json:"node_id"`
	Samples []orchestrator.Sample `json:"samples"`
}

// healthAnswer is GET /healthz's answer: role, leader and self only on a
// server that leads others (fail-over).
type healthAnswer struct {
	Status string `json:"status"`
	Role   string `json:"role,omitempty"`
	Leader string `json:"leader,omitempty"`
	Self   string `json:"self,omitempty"`
}

// routeDocs describes every route of the table, by "METHOD /path".
func routeDocs() map[string]routeDoc {
	page := []param{
		intParam("limit", "at most this many rows", 1, 100000),
		strParam("cursor", "the next_cursor of the previous page"),
	}
	jobFilters := []param{
		stateParam(),
		strParam("user", "only this user's jobs"),
		strParam("project", "only this project's jobs"),
		strParam("name", "only jobs of this name, exactly"),
		sinceParam("since", "only jobs submitted at or after"),
		sinceParam("until", "only jobs submitted before"),
		intParam("limit", "at most this many jobs, newest first (default 1000)", 1, 100000),
		strParam("cursor", "the next_cursor of the previous page (docs/history.md)"),
	}
	mine := param{name: "mine", desc: "true: the caller's own jobs only; auto: the caller's own for a user, everyone's for admins and viewers; false (default): as user= says",
		schema: map[string]any{"type": "string", "enum": []any{"true", "false", "auto"}}}
	jobFilters = append(jobFilters, mine)
	queueFilters := append(slices.Clone(page), strParam("user", "only this user's queued jobs (each keeps its place in the whole queue)"), mine)
	grace := durationParam("grace", "SIGTERM to SIGKILL for running tasks (default: the server's)")
	shell := []param{
		intParam("rank", "which node of a gang (0: the first)", 0, 4096),
		boolParam("tty", "a terminal (true) or plain pipes"),
		intParam("rows", "the terminal's rows", 0, 65535),
		intParam("cols", "the terminal's columns", 0, 65535),
		strParam("term", "$TERM in the shell"),
		{name: "cmd", desc: "the command's argv, one parameter per argument (default: the login shell)", schema: map[string]any{"type": "string"}, repeated: true},
	}
	websocket := []answer{{status: 101, desc: "a WebSocket", media: "-"}}
	return map[string]routeDoc{
		"GET /healthz":      {answers: ok(healthAnswer{}), tag: "server"},
		"GET /openapi.json": {answers: []answer{{status: 200, desc: "this document", body: map[string]any{}}}, tag: "server"},
		"GET /metrics":      {answers: []answer{{status: 200, desc: "Prometheus text exposition", media: "text/plain"}}, tag: "server"},
		"GET /advise":       {query: []param{sinceParam("since", "the start of the period (30d, 720h or a time; default 30d)")}, answers: ok(api.LoadProfile{}), errors: []int{503}, tag: "cluster"},
		"GET /history":      {query: []param{sinceParam("since", "from (default 1h)"), intParam("points", "at most this many points", 1, 5000), strParam("node", "a node's id, or all (default: the cluster)")}, answers: ok(api.History{}), tag: "cluster"},
		"GET /events":       {answers: []answer{{status: 200, media: "text/event-stream", events: map[string]any{"update": api.DashboardUpdate{}, "delta": api.DashboardDelta{}, "ended": eventsEnded{}}, desc: "server-sent events: first `update` (data: DashboardUpdate), then `delta` (data: DashboardDelta) after every change; `ended` (data: {\"reason\": \"token_revoked\"|\"token_expired\"}) when the caller's token stops working"}}, tag: "server"},
		"POST /queue/submit": {
			body:    api.SubmitRequest{},
			headers: []param{strParam("Idempotency-Key", "a retried submission with the same key (per user, up to 256 characters) answers the first's job instead of making another")},
			answers: []answer{{status: 201, desc: "the job (for an array: its first task, with the array)", body: api.SubmitAnswer{}}},
			errors:  []int{409, 429}, tag: "jobs",
		},
		"GET /queue":            {query: queueFilters, answers: ok(api.QueueResponse{}), tag: "jobs"},
		"GET /queue/statistics": {answers: ok(api.QueueStatistics{}), tag: "jobs"},
		"DELETE /queue/{job_id}": {query: []param{grace}, answers: []answer{
			{status: 200, desc: "canceled (when {job_id} names a job array: the array)", oneOf: []any{api.Job{}, api.Array{}}},
			{status: 202, desc: "being stopped (SIGTERM sent)", oneOf: []any{api.Job{}, api.Array{}}},
		}, errors: []int{409}, tag: "jobs"},
		"PATCH /queue/{job_id}/priority":   {body: api.PriorityRequest{}, answers: ok(api.Job{}), errors: []int{409}, tag: "jobs"},
		"PATCH /queue/{job_id}/dependency": {body: api.DependencyRequest{}, answers: ok(api.Job{}), errors: []int{409}, tag: "jobs"},
		"GET /jobs":                        {query: jobFilters, answers: ok(api.JobList{}), tag: "jobs"},
		"GET /jobs/{job_id}":               {answers: ok(api.Job{}), tag: "jobs"},
		"GET /jobs/{job_id}/what-if": {query: []param{intParam("gpus", "GPUs per node to plan the queued job with (required; from 1 to the GPUs of the largest node)", 1, 4096)},
			answers: ok(api.WhatIf{}), tag: "jobs"},
		"GET /complete/jobs": {answers: ok(api.JobRefList{}), tag: "jobs"},
		"GET /jobs/{job_id}/logs": {query: []param{
			intParam("attempt", "which run of a retried job, from 0 (default: the latest)", 0, 1<<30),
			intParam("rank", "which node of a gang (0: the first)", 0, 4096),
			boolParam("follow", "stream until the attempt ends (true or 1)"),
			intParam("offset", "with follow: start the stream at this byte of the log (a reconnect resumes where it was)", 0, 1<<62),
		}, headers: []param{strParam("Range", "bytes=N-M, bytes=N- or bytes=-N (the last N bytes: a tail); not with follow")},
			answers: []answer{
				{status: 200, media: "text/plain", desc: "the output (X-Corral-Attempt names the attempt)"},
				{status: 206, media: "text/plain", desc: "the range of the output asked for (Content-Range)"},
				{status: 416, media: "text/plain", desc: "the range lies outside the log (Content-Range: bytes */SIZE)"},
			}, tag: "jobs"},
		"GET /jobs/{job_id}/shell":               {query: shell, answers: websocket, errors: []int{409}, tag: "jobs"},
		"GET /cluster/gpu-status":                {answers: ok(api.ClusterStatus{}), tag: "cluster"},
		"GET /cluster/nodes":                     {answers: ok(api.ClusterStatus{}), tag: "cluster"},
		"GET /cluster/nodes/{node_id}/history":   {query: []param{sinceParam("since", "from (default 1h)")}, answers: ok(nodeHistoryAnswer{}), tag: "cluster"},
		"POST /cluster/nodes/{node_id}/{action}": {answers: ok(api.NodeAction{}), tag: "cluster"},
		"POST /cluster/gpu-allocate": {body: api.AllocateRequest{}, answers: []answer{
			{status: 201, desc: "held", body: api.Hold{}},
			{status: 202, desc: "queued (wait: true): follow it at poll", body: api.Hold{}},
		}, errors: []int{409}, tag: "cluster"},
		"POST /cluster/gpu-release":                 {body: api.ReleaseRequest{}, answers: ok(api.Hold{}), errors: []int{404, 409}, tag: "cluster"},
		"GET /orchestrator/status":                  {answers: ok(api.OrchestratorStatus{}), tag: "orchestrator"},
		"POST /orchestrator/start":                  {answers: ok(api.OrchestratorStatus{}), tag: "orchestrator"},
		"POST /orchestrator/stop":                   {answers: ok(api.OrchestratorStatus{}), tag: "orchestrator"},
		"GET /orchestrator/policies":                {answers: ok(api.Policies{}), tag: "orchestrator"},
		"PUT /orchestrator/policies":                {body: api.PoliciesUpdate{}, answers: ok(api.Policies{}), tag: "orchestrator"},
		"POST /agent/v1/register":                   {body: api.AgentRegistration{}, answers: ok(api.AgentConfig{}), errors: []int{409}, tag: "agents"},
		"POST /agent/v1/sync":                       {body: api.AgentReport{}, answers: ok(api.AgentWork{}), errors: []int{409}, tag: "agents"},
		"POST /agent/v1/logs":                       {body: api.LogChunk{}, answers: []answer{{status: 204, desc: "written"}}, errors: []int{409}, tag: "agents"},
		"GET /agent/v1/tunnel":                      {query: []param{strParam("node_id", "the agent's node"), strParam("session", "a stream's session (absent: the control channel)"), strParam("failure", "why the agent could not open the stream")}, answers: websocket, errors: []int{409}, tag: "agents"},
		"POST /auth/tokens":                         {body: api.TokenRequest{}, answers: []answer{{status: 201, desc: "the token, with its secret (shown once)", body: api.NewToken{}}}, tag: "auth"},
		"GET /auth/tokens":                          {answers: ok(api.TokenList{}), tag: "auth"},
		"DELETE /auth/tokens/{id}":                  {answers: ok(api.Token{}), tag: "auth"},
		"GET /auth/whoami":                          {answers: ok(api.Whoami{}), tag: "auth"},
		"POST /auth/session":                        {body: api.SessionRequest{}, optionalBody: true, answers: ok(api.Whoami{}), tag: "auth"},
		"DELETE /auth/session":                      {answers: []answer{{status: 204, desc: "signed out"}}, tag: "auth"},
		"POST /auth/device":                         {answers: ok(api.DeviceStart{}), tag: "auth"},
		"POST /auth/device/token":                   {body: api.DeviceTokenRequest{}, answers: []answer{{status: 201, desc: "the approved sign-in's token, once", body: api.LoginAnswer{}}}, errors: []int{409}, tag: "auth"},
		"POST /auth/device/approve":                 {body: api.DeviceApproveRequest{}, answers: ok(api.DeviceApproved{}), tag: "auth"},
		"POST /auth/invites":                        {body: api.InviteRequest{}, answers: []answer{{status: 201, desc: "the invite, its code shown once", body: api.Invite{}}}, tag: "auth"},
		"POST /auth/invites/redeem":                 {body: api.InviteRedeemRequest{}, answers: []answer{{status: 201, desc: "a token of the invite's user", body: api.LoginAnswer{}}}, tag: "auth"},
		"POST /auth/login/node":                     {body: api.NodeLoginRequest{}, answers: []answer{{status: 201, desc: "a token of the node's local user", body: api.LoginAnswer{}}}, tag: "auth"},
		"POST /auth/logout":                         {body: api.SessionRequest{}, optionalBody: true, answers: ok(api.Token{}), errors: []int{409}, tag: "auth"},
		"GET /audit":                                {query: []param{strParam("user", "only this user's calls"), strParam("action", "only this action (job.submit, token.create, ...)"), sinceParam("since", "only calls at or after"), intParam("limit", "at most this many (default 1000)", 1, 100000), intParam("before", "only entries before this sequence number", 1, 1<<62)}, answers: ok(api.AuditList{}), tag: "auth"},
		"GET /notify/endpoints":                     {answers: ok(api.EndpointList{}), tag: "notify"},
		"POST /notify/endpoints":                    {body: api.EndpointRequest{}, answers: []answer{{status: 201, desc: "the endpoint, its URL and secret shown once", body: api.Endpoint{}}}, errors: []int{503}, tag: "notify"},
		"DELETE /notify/endpoints/{endpoint_id}":    {answers: ok(api.Endpoint{}), errors: []int{503}, tag: "notify"},
		"POST /notify/endpoints/{endpoint_id}/test": {answers: ok(api.EndpointTest{}), errors: []int{502, 503}, tag: "notify"},
		"GET /notifications": {query: []param{
			{name: "state", desc: "only notifications in this state", schema: map[string]any{"type": "string", "enum": []any{"pending", "delivered", "failed"}}},
			strParam("endpoint", "only this endpoint's"),
			intParam("limit", "at most this many (default 100)", 1, 1000),
			intParam("before", "only notifications before this id", 1, 1<<62),
		}, answers: ok(api.NotificationList{}), tag: "notify"},
		"GET /notify/defaults":        {query: []param{strParam("user", "admins: this user's defaults")}, answers: ok(api.NotifyDefaults{}), tag: "notify"},
		"PUT /notify/defaults":        {query: []param{strParam("user", "admins: this user's defaults")}, body: api.NotifyDefaultsRequest{}, answers: ok(api.NotifyDefaults{}), errors: []int{503}, tag: "notify"},
		"GET /arrays/{array_id}":      {answers: ok(api.Array{}), tag: "jobs"},
		"PATCH /arrays/{array_id}":    {body: api.ArrayRequest{}, answers: ok(api.Array{}), tag: "jobs"},
		"DELETE /arrays/{array_id}":   {query: []param{grace}, answers: []answer{{status: 200, desc: "canceled", body: api.Array{}}, {status: 202, desc: "running tasks are being stopped", body: api.Array{}}}, tag: "jobs"},
		"GET /reservations":           {answers: ok(api.ReservationList{}), tag: "reservations"},
		"POST /reservations":          {body: api.ReservationRequest{}, answers: []answer{{status: 201, desc: "booked", body: api.Reservation{}}}, errors: []int{409}, tag: "reservations"},
		"GET /reservations/{name}":    {answers: ok(api.Reservation{}), tag: "reservations"},
		"PATCH /reservations/{name}":  {body: api.ReservationRequest{}, answers: ok(api.Reservation{}), errors: []int{409}, tag: "reservations"},
		"DELETE /reservations/{name}": {answers: ok(api.Reservation{}), tag: "reservations"},
		"GET /usage": {query: []param{
			{name: "by", desc: "group by user, project, gpu-type, node or week", schema: map[string]any{"type": "string", "enum": []any{"user", "project", "gpu-type", "node", "week"}}},
			strParam("since", "from: a date (2026-11-01), an RFC 3339 time, or a duration back from now"),
			strParam("until", "to (exclusive), as since"),
			{name: "format", desc: "json (default) or csv", schema: map[string]any{"type": "string", "enum": []any{"json", "csv"}}},
		}, answers: []answer{{status: 200, body: usage.Report{}, also: "text/csv"}}, tag: "usage"},
		"GET /prices":                         {answers: ok(usage.PriceList{}), tag: "usage"},
		"PUT /prices/{model}":                 {body: usage.PriceRequest{}, answers: ok(usage.PriceList{}), tag: "usage"},
		"DELETE /prices/{model}":              {answers: ok(usage.PriceList{}), tag: "usage"},
		"GET /budgets":                        {answers: ok(usage.BudgetList{}), tag: "usage"},
		"PUT /budgets/{kind}/{name}":          {body: usage.BudgetRequest{}, answers: ok(usage.BudgetStatus{}), tag: "usage"},
		"POST /budgets/{kind}/{name}/release": {answers: ok(usage.BudgetStatus{}), tag: "usage"},
		"DELETE /budgets/{kind}/{name}":       {answers: []answer{{status: 204, desc: "removed"}}, tag: "usage"},
	}
}
