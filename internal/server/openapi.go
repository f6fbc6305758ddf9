package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/jsonschema"
	"github.com/corral-sched/corral/internal/lazyre"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/usage"
)

var pathParam = lazyre.New(`\{([a-z_]+)\}`)

// openapi serves the OpenAPI 3.1 description of this API (Document).
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	doc, err := s.Document()
	if err != nil {
		// Still a document: what could not be described is left open
		// (the openapi tests fail on it).
		s.log.Warn("openapi: the document is incomplete", "err", err)
	}
	return writeJSON(w, http.StatusOK, doc)
}

// Document is the OpenAPI 3.1 description of the API: every route of the
// table (server.go) with its parameters, request body and answers
// (openapi_routes.go), their schemas reflected from the Go types that the
// handlers encode and decode (internal/api), and the error body every
// route may answer. It cannot list a route that does not exist or miss
// one that does. clients/openapi.json is its copy for the clients
// (docs/api.md); TestOpenAPIFileCurrent keeps it current.
//
// The error names what could not be described (a route without a
// routeDoc, a type with its own JSON encoding and no schema); the
// document is whole otherwise, and always returned.
func (s *Server) Document() (map[string]any, error) {
	docs := routeDocs()
	ref := newReflector()
	paths := map[string]map[string]any{}
	tags := map[string]bool{}
	var errs []error
	for _, rt := range s.routes {
		key := rt.method + " " + rt.path
		d, ok := docs[key]
		if !ok {
			errs = append(errs, fmt.Errorf("route %s has no routeDoc (openapi_routes.go)", key))
			d = routeDoc{answers: []answer{{status: 200, desc: "not described yet"}}}
		}
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		op := operation(ref, rt, d)
		if d.tag != "" {
			op["tags"] = []string{d.tag}
			tags[d.tag] = true
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	ref.For(api.ErrorBody{}) // every error answer (errorResponses)
	if err := ref.Err(); err != nil {
		errs = append(errs, err)
	}
	schemas := map[string]any{}
	for name, sch := range ref.Components() {
		schemas[name] = sch
	}
	for name, sch := range extraSchemas() {
		schemas[name] = sch
	}
	var tagList []map[string]string
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range tags {
			if !yield(t) {
				return
			}
		}
	}) {
		tagList = append(tagList, map[string]string{"name": t, "description": tagDescription(t)})
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Corral API",
			"version":     "1",
			"description": "Corral, a GPU job scheduler. Generated from the server's route table and its Go types; docs/api.md says how to regenerate it and where the clients are.",
		},
		"servers": []map[string]string{{"url": "http://127.0.0.1:7450", "description": "corral up's default address"}},
		"tags":    tagList,
		"paths":   paths,
		"components": map[string]any{
			"schemas":   schemas,
			"responses": errorResponses(),
			"securitySchemes": map[string]any{
				"bearerToken": map[string]string{"type": "http", "scheme": "bearer", "description": "an API token (corral token create); its role decides what it may do"},
				"session":     map[string]string{"type": "apiKey", "in": "cookie", "name": sessionCookie, "description": "the dashboard's session; changes also need the " + csrfHeader + " header"},
				"joinToken":   map[string]string{"type": "http", "scheme": "bearer", "description": "the agents' join token (agent protocol only)"},
			},
		},
		"security": []any{map[string][]string{"bearerToken": {}}, map[string][]string{"session": {}}},
	}, errors.Join(errs...)
}

func tagDescription(tag string) string {
	switch tag {
	case "agents":
		return "The agent protocol (join token): nodes register, report and fetch work"
	case "auth":
		return "Tokens, sign-in and the audit trail"
	case "cluster":
		return "Nodes, GPUs, holds and the cluster's history"
	case "jobs":
		return "Submitting, listing, changing and canceling jobs and job arrays"
	case "notify":
		return "Notification endpoints and their delivery log"
	case "orchestrator":
		return "The scheduling loop and its policy"
	case "reservations":
		return "Bookings of GPUs ahead of time"
	case "server":
		return "The server itself: health, metrics, this document, live events"
	case "usage":
		return "The usage ledger, prices and budgets"
	}
	return tag
}

// operation describes one route.
func operation(ref *jsonschema.Reflector, rt route, d routeDoc) map[string]any {
	op := map[string]any{
		"summary":     rt.summary,
		"operationId": operationID(rt.method, rt.path),
	}
	var params []map[string]any
	pathParams := pathParam.FindAllStringSubmatch(rt.path, -1)
	for _, m := range pathParams {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]string{"type": "string"}, "description": pathParamDescription(m[1])})
	}
	for _, p := range d.query {
		params = append(params, paramObject(p, "query"))
	}
	for _, p := range d.headers {
		params = append(params, paramObject(p, "header"))
	}
	if params != nil {
		op["parameters"] = params
	}
	if d.body != nil {
		op["requestBody"] = map[string]any{
			"required": !d.optionalBody,
			"content":  map[string]any{"application/json": map[string]any{"schema": ref.For(d.body)}},
		}
	}
	responses := map[string]any{}
	for _, a := range d.answers {
		resp := map[string]any{"description": a.desc}
		if a.desc == "" {
			resp["description"] = http.StatusText(a.status)
		}
		content := map[string]any{}
		switch {
		case a.media == "-":
		case a.media != "":
			sch := map[string]any{"type": "string"}
			mt := map[string]any{"schema": sch}
			if len(a.events) > 0 {
				// The data of each event, by name; contentSchema says that
				// each event's data is one of them.
				events := map[string]any{}
				var alts []any
				for _, name := range slices.Sorted(maps.Keys(a.events)) {
					events[name] = ref.For(a.events[name])
					alts = append(alts, events[name])
				}
				mt["x-corral-events"] = events
				sch["contentSchema"] = map[string]any{"anyOf": alts}
			}
			content[a.media] = mt
		case a.oneOf != nil:
			var alts []any
			for _, v := range a.oneOf {
				alts = append(alts, ref.For(v))
			}
			content["application/json"] = map[string]any{"schema": map[string]any{"anyOf": alts}}
		case a.body != nil:
			content["application/json"] = map[string]any{"schema": ref.For(a.body)}
		}
		if a.also != "" {
			content[a.also] = map[string]any{"schema": map[string]any{"type": "string"}}
		}
		if len(content) > 0 {
			resp["content"] = content
		}
		responses[strconv.Itoa(a.status)] = resp
	}
	for _, code := range errorStatuses(rt, d, len(pathParams) > 0) {
		responses[strconv.Itoa(code)] = map[string]any{"$ref": "#/components/responses/" + errorResponseName(code)}
	}
	responses["default"] = map[string]any{"$ref": "#/components/responses/Error"}
	op["responses"] = responses
	switch rt.access {
	case public:
		op["security"] = []any{} // no token
	case agent:
		op["security"] = []any{map[string][]string{"joinToken": {}}}
	}
	return op
}

// operationID is a route's name for generated clients: its method and
// path, e.g. get_jobs_job_id.
func operationID(method, path string) string {
	return strings.ToLower(method) + strings.NewReplacer("/", "_", "{", "", "}", "", "-", "_", ".", "_").Replace(path)
}

func pathParamDescription(name string) string {
	switch name {
	case "job_id":
		return "a job's id, or an unambiguous prefix of it"
	case "array_id":
		return "a job array's id"
	case "action":
		return "cordon, drain or uncordon"
	case "kind":
		return "user or project"
	}
	return "the " + strings.ReplaceAll(name, "_", " ")
}

func paramObject(p param, in string) map[string]any {
	o := map[string]any{"name": p.name, "in": in, "schema": p.schema}
	if p.desc != "" {
		o["description"] = p.desc
	}
	if p.repeated {
		o["schema"] = map[string]any{"type": "array", "items": p.schema}
		o["style"], o["explode"] = "form", true
	}
	return o
}

// errorStatuses are the error answers a route may give: authentication
// and authorization for those that need a token, 400/413/422 for a body
// or query that does not fit, 404 for a path naming nothing, and the
// route's own (routeDoc.errors).
func errorStatuses(rt route, d routeDoc, hasPathParams bool) []int {
	var codes []int
	if d.body != nil {
		codes = append(codes, 400, 413)
	}
	if rt.access != public {
		codes = append(codes, 401, 403)
	}
	if hasPathParams {
		codes = append(codes, 404)
	}
	if d.body != nil || len(d.query) > 0 || len(d.headers) > 0 || hasPathParams {
		codes = append(codes, 422)
	}
	codes = append(codes, d.errors...)
	slices.Sort(codes)
	return slices.Compact(codes)
}

// errorNames names the shared error answers by status.
func errorNames() map[int]string {
	return map[int]string{
		400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
		413: "TooLarge", 422: "Invalid", 429: "TooManyRequests", 502: "BadGateway", 503: "Unavailable",
	}
}

func errorResponseName(code int) string {
	if n, ok := errorNames()[code]; ok {
		return n
	}
	return "Error" + strconv.Itoa(code)
}

// errorResponses are the shared error answers: every one is an ErrorBody.
func errorResponses() map[string]any {
	body := map[string]any{"application/json": map[string]any{"schema": map[string]string{"$ref": "#/components/schemas/ErrorBody"}}}
	out := map[string]any{
		"Error": map[string]any{"description": "an error: {\"error\": {code, message, field}}", "content": body},
	}
	desc := map[int]string{
		400: "the request could not be read (malformed_json, unknown_field, invalid_header)",
		401: "no valid token (unauthenticated)",
		403: "the token may not do this (forbidden, not_owner, user_mismatch, project_forbidden)",
		404: "nothing by that id or name (not_found)",
		409: "the request is fine but the state forbids it",
		413: "the body is larger than 1 MiB (body_too_large)",
		422: "a field or parameter is invalid (invalid_field); error.field names it",
		429: "too many submissions (rate_limited, queue_full); Retry-After says when to try again",
		502: "the notification could not be delivered",
		503: "the feature is off on this server",
	}
	for code, name := range errorNames() {
		out[name] = map[string]any{"description": desc[code], "content": body}
	}
	return out
}

// newReflector is the reflector for the API's types: the enums and the
// types with their own JSON encoding, and the raw request fields
// (api.RawValue) by what they accept.
func newReflector() *jsonschema.Reflector {
	r := jsonschema.New()
	jsonschema.Enum(r, api.States, "a job's state, in lifecycle order")
	jsonschema.Enum(r, api.Roles, "what a token may do")
	r.Define(reflect.TypeFor[api.Priority](), map[string]any{
		"type": "string", "enum": []any{"low", "normal", "high", "critical"},
		"description": "a priority level (requests also accept 1-4; see PriorityInput)"})
	r.Define(reflect.TypeFor[api.Seconds](), map[string]any{"type": "number", "minimum": 0, "description": "a duration in seconds"})
	r.Name(reflect.TypeFor[healthAnswer](), "Health")
	r.Name(reflect.TypeFor[eventsEnded](), "EventsEnded")
	r.Name(reflect.TypeFor[nodeHistoryAnswer](), "NodeHistory")
	r.Name(reflect.TypeFor[usage.Report](), "UsageReport")
	r.Name(reflect.TypeFor[usage.Row](), "UsageRow")
	r.Name(reflect.TypeFor[orchestrator.Sample](), "NodeSample")
	r.Field = func(owner reflect.Type, f reflect.StructField, name string) (map[string]any, bool) {
		if f.Type != reflect.TypeFor[api.RawValue]() {
			return nil, false
		}
		kind, known := rawFieldSchema(name)
		if !known {
			return map[string]any{"description": "any JSON value (a new raw field: name what it accepts in rawFields, openapi.go)"}, true
		}
		return map[string]any{"$ref": "#/components/schemas/" + kind}, true
	}
	return r
}

// rawFieldSchema says what a raw request field (api.RawValue, parsed by
// the server with a field-aware error) accepts, by its JSON name: the name
// of a schema of extraSchemas. TestOpenAPIRawFields fails for a raw field
// of a request type that is not listed.
func rawFieldSchema(name string) (string, bool) {
	switch name {
	case "priority":
		return "PriorityInput", true
	case "estimated_duration", "time_limit", "preempt_grace", "elastic_wait", "duration", "expires_in",
		"idle_window", "idle_warn", "aging_interval", "half_life", "default_estimate", "min_run_time",
		"starve_after", "reserve_after", "starve_light_drain", "starve_light_floor":
		return "DurationInput", true
	}
	return "", false
}

// extraSchemas are the named schemas no Go type stands for.
func extraSchemas() map[string]any {
	return map[string]any{
		"PriorityInput": map[string]any{
			"description": "a priority: low, normal, high or critical (any case), or 1 to 4",
			"anyOf": []any{
				map[string]any{"type": "string", "examples": []any{"low", "normal", "high", "critical"}},
				map[string]any{"type": "integer", "minimum": 1, "maximum": 4},
				map[string]any{"type": "null"},
			},
		},
		"DurationInput": map[string]any{
			"description": "a duration: a number of seconds, or a string of seconds or a Go duration such as \"90s\", \"1h30m\" (at most one year); null: unset",
			"anyOf": []any{
				map[string]any{"type": "number", "minimum": 0},
				map[string]any{"type": "string", "examples": []any{"3600", "90m", "1h30m"}},
				map[string]any{"type": "null"},
			},
		},
	}
}
