package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite clients/openapi.json from the route table and the api types")

// openAPIFile is the document's copy for the clients (docs/api.md).
const openAPIFile = "../../clients/openapi.json"

// documentOf returns the document of a fresh test server, parsed back
// from its JSON as a client reads it.
func documentOf(t *testing.T) (map[string]any, []byte) {
	t.Helper()
	s, _, _ := newHandler(t, idleExec{}, slog.New(slog.DiscardHandler))
	doc, err := s.Document()
	if err != nil {
		t.Error(err)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	var parsed map[string]any
	if err := json.Unmarshal(b, &parsed); err != nil {
		t.Fatal(err)
	}
	return parsed, b
}

// TestOpenAPIFileCurrent: clients/openapi.json is the document this code
// serves; with -update it is rewritten.
func TestOpenAPIFileCurrent(t *testing.T) {
	_, b := documentOf(t)
	if *updateOpenAPI {
		if err := os.WriteFile(openAPIFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatalf("%v (write it with: go test ./internal/server -run TestOpenAPIFileCurrent -update)", err)
	}
	if !bytes.Equal(have, b) {
		t.Fatalf("%s is stale: run clients/generate.sh (or go test ./internal/server -run TestOpenAPIFileCurrent -update) and commit the result", filepath.Clean(openAPIFile))
	}
}

// TestOpenAPIRoutes: every route of the mux is in the document with its
// method, every routeDoc describes a route, and every documented path
// reaches a handler (not the 404/405 of noRoute).
func TestOpenAPIRoutes(t *testing.T) {
	s, _, _ := newHandler(t, idleExec{}, slog.New(slog.DiscardHandler))
	doc, _ := documentOf(t)
	paths := doc["paths"].(map[string]any)
	docs := routeDocs()
	seen := map[string]bool{}
	for _, rt := range s.routes {
		key := rt.method + " " + rt.path
		seen[key] = true
		ops, _ := paths[rt.path].(map[string]any)
		if _, ok := ops[strings.ToLower(rt.method)]; !ok {
			t.Errorf("%s is served but missing from /openapi.json", key)
		}
		if _, ok := docs[key]; !ok {
			t.Errorf("%s has no routeDoc in openapi_routes.go", key)
		}
	}
	for key := range docs {
		if !seen[key] {
			t.Errorf("routeDoc %q describes no route of the table", key)
		}
	}
	n := 0
	for path, ops := range paths {
		for method := range ops.(map[string]any) {
			n++
			concrete := pathParam.Re().ReplaceAllString(path, "x")
			req := httptest.NewRequest(strings.ToUpper(method), concrete, nil)
			req.Header.Set("Authorization", "Bearer nobody")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			var e api.ErrorBody
			json.Unmarshal(w.Body.Bytes(), &e)
			if w.Code == http.StatusMethodNotAllowed || strings.HasPrefix(e.Error.Message, "no route ") {
				t.Errorf("%s %s is documented but the mux answers %d %s", method, path, w.Code, e.Error.Message)
			}
		}
	}
	if n != len(s.routes) {
		t.Errorf("the document has %d operations, the route table %d routes", n, len(s.routes))
	}
}

// TestOpenAPIResponseTypesComplete: a value of every type the document
// names, with every field set, encodes to JSON that its schema describes
// fully: no key the schema lacks, no required key missing, types and
// enums as said.
func TestOpenAPIResponseTypesComplete(t *testing.T) {
	doc, _ := documentOf(t)
	v := newDocValidator(doc)
	paths := doc["paths"].(map[string]any)
	jsonSchema := func(content any) map[string]any {
		c, _ := content.(map[string]any)
		j, _ := c["application/json"].(map[string]any)
		s, _ := j["schema"].(map[string]any)
		return s
	}
	for key, d := range routeDocs() {
		method, path, _ := strings.Cut(key, " ")
		op := paths[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
		type typed struct {
			v      any
			schema map[string]any
			where  string
		}
		var cases []typed
		for _, a := range d.answers {
			resp := op["responses"].(map[string]any)[strconv.Itoa(a.status)].(map[string]any)
			for _, typ := range append([]any{a.body}, a.oneOf...) {
				if typ != nil {
					cases = append(cases, typed{typ, jsonSchema(resp["content"]), strconv.Itoa(a.status)})
				}
			}
		}
		if d.body != nil {
			cases = append(cases, typed{d.body, jsonSchema(op["requestBody"].(map[string]any)["content"]), "request"})
		}
		for _, c := range cases {
			if c.schema == nil {
				t.Errorf("%s %s: no JSON schema", key, c.where)
				continue
			}
			val := reflect.New(reflect.TypeOf(c.v)).Elem()
			fill(val, 0)
			b, err := json.Marshal(val.Interface())
			if err != nil {
				t.Fatalf("%s: %T: %v", key, c.v, err)
			}
			var got any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for _, problem := range v.check(c.schema, got, fmt.Sprintf("%T", c.v)) {
				t.Errorf("%s %s: %s", key, c.where, problem)
			}
		}
	}
}

// fill sets every field of v to a value that is not zero, as far as depth
// 12 (recursive types end there).
func fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[api.RawValue]() {
			v.SetBytes([]byte(`"1h"`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		switch v.Type() {
		case reflect.TypeFor[api.State]():
			v.SetString(string(api.StateRunning))
		case reflect.TypeFor[api.Role]():
			v.SetString(string(api.RoleUser))
		default:
			v.SetString("x")
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(2)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(2)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2.5)
	}
}

// docValidator checks JSON values against the document's schemas: the
// subset of JSON Schema the generator writes ($ref, type, properties,
// required, items, additionalProperties, enum, anyOf).
type docValidator struct{ schemas map[string]any }

func newDocValidator(doc map[string]any) docValidator {
	return docValidator{schemas: doc["components"].(map[string]any)["schemas"].(map[string]any)}
}

func (v docValidator) check(schema map[string]any, val any, at string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s, ok := v.schemas[name].(map[string]any)
		if !ok {
			return []string{at + ": $ref " + ref + " names no schema"}
		}
		return v.check(s, val, at)
	}
	if alts, ok := schema["anyOf"].([]any); ok {
		var all []string
		for _, a := range alts {
			p := v.check(a.(map[string]any), val, at)
			if len(p) == 0 {
				return nil
			}
			all = append(all, p...)
		}
		return []string{fmt.Sprintf("%s: fits none of anyOf: %s", at, strings.Join(all, "; "))}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, val) {
		return []string{fmt.Sprintf("%s: %v is not one of %v", at, val, enum)}
	}
	if typ, ok := schema["type"]; ok && !typeFits(typ, val) {
		return []string{fmt.Sprintf("%s: %s is not of type %v", at, truncate(fmt.Sprint(val), 60), typ)}
	}
	var problems []string
	switch x := val.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		if props == nil && extra == nil {
			break // any object
		}
		for k, fv := range x {
			ps, ok := props[k].(map[string]any)
			switch {
			case ok:
				problems = append(problems, v.check(ps, fv, at+"."+k)...)
			case extra != nil:
				problems = append(problems, v.check(extra, fv, at+"["+strconv.Quote(k)+"]")...)
			default:
				problems = append(problems, at+"."+k+": the JSON has this field; its schema does not")
			}
		}
		req, _ := schema["required"].([]any)
		for _, r := range req {
			if _, ok := x[r.(string)]; !ok {
				problems = append(problems, at+"."+r.(string)+": required by the schema but not written")
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				problems = append(problems, v.check(items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return problems
}

func typeFits(typ any, val any) bool {
	var types []string
	switch t := typ.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			types = append(types, e.(string))
		}
	}
	for _, t := range types {
		switch x := val.(type) {
		case nil:
			if t == "null" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case float64:
			if t == "number" || t == "integer" && x == float64(int64(x)) {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case map[string]any:
			if t == "object" {
				return true
			}
		}
	}
	return false
}

// TestOpenAPIRawFields: every raw field (api.RawValue) of a request body
// says what it accepts (rawFieldSchema).
func TestOpenAPIRawFields(t *testing.T) {
	var walk func(t reflect.Type, seen map[reflect.Type]bool, found func(name string))
	walk = func(typ reflect.Type, seen map[reflect.Type]bool, found func(string)) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			if typ == reflect.TypeFor[api.RawValue]() {
				return
			}
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Type == reflect.TypeFor[api.RawValue]() {
				found(name)
				continue
			}
			walk(f.Type, seen, found)
		}
	}
	for key, d := range routeDocs() {
		if d.body == nil {
			continue
		}
		walk(reflect.TypeOf(d.body), map[reflect.Type]bool{}, func(name string) {
			if _, ok := rawFieldSchema(name); !ok {
				t.Errorf("%s: raw field %q: say what it accepts in rawFieldSchema (openapi.go)", key, name)
			}
		})
	}
}

// TestOpenAPIExperimentRun: the job schema carries every field of the
// seed's ExperimentRun (gpuAllocation, queueInfo, orchestrationMetadata;
// docs/api.md maps them).
func TestOpenAPIExperimentRun(t *testing.T) {
	doc, _ := documentOf(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	props := func(name string) map[string]any {
		return schemas[name].(map[string]any)["properties"].(map[string]any)
	}
	job := props("Job")
	for _, f := range []string{
		"gpu_count", "nodes", "gpu_memory_gb", "allocation", "started_at", // gpuAllocation
		"submitted_at", "queue_position", "estimated_start_time", // queueInfo
		"policy", "priority", "retry_count", "max_retries", // orchestrationMetadata
	} {
		if _, ok := job[f]; !ok {
			t.Errorf("the Job schema lacks %s", f)
		}
	}
	for _, f := range []string{"node_id", "gpu_id", "memory_gb"} {
		if _, ok := props("Allocation")[f]; !ok {
			t.Errorf("the Allocation schema lacks %s", f)
		}
	}
	queued := props("QueuedJob")
	for _, f := range []string{"id", "user", "priority", "requested_gpus", "queued_at", "estimated_wait_time", "queue_position"} {
		if _, ok := queued[f]; !ok {
			t.Errorf("the QueuedJob schema lacks %s", f)
		}
	}
}

// TestOpenAPIAnswersLive: a live server's answers, success and error,
// have a status the document lists for their route and fit its schema
// there (so a routeDoc naming the wrong type fails here).
func TestOpenAPIAnswersLive(t *testing.T) {
	doc, _ := documentOf(t)
	v := newDocValidator(doc)
	paths := doc["paths"].(map[string]any)
	responses := doc["components"].(map[string]any)["responses"].(map[string]any)
	ts := busyServer(t)
	jobs := ts.o.Jobs(orchestrator.JobFilter{})
	job := jobs[0].ID
	queued := ""
	for _, j := range jobs {
		if j.State == api.StateQueued {
			queued = j.ID
		}
	}
	vars := map[string]string{}
	call := func(method, route, path, body string) {
		t.Helper()
		for k, val := range vars {
			path = strings.ReplaceAll(path, "{"+k+"}", val)
		}
		req, _ := http.NewRequest(method, ts.url+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got any
		raw, _ := io.ReadAll(resp.Body)
		op, ok := paths[route].(map[string]any)[strings.ToLower(method)].(map[string]any)
		if !ok {
			t.Fatalf("%s %s is not in the document", method, route)
		}
		r, ok := op["responses"].(map[string]any)[strconv.Itoa(resp.StatusCode)].(map[string]any)
		if !ok {
			t.Errorf("%s %s answered %d, which the document does not list: %s", method, path, resp.StatusCode, truncate(string(raw), 200))
			return
		}
		if ref, ok := r["$ref"].(string); ok {
			r = responses[strings.TrimPrefix(ref, "#/components/responses/")].(map[string]any)
		}
		content, _ := r["content"].(map[string]any)
		mt, _ := content["application/json"].(map[string]any)
		if mt == nil {
			return
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return
		}
		if m, ok := got.(map[string]any); ok {
			if id, ok := m["id"].(string); ok && method == "POST" && route == "/auth/tokens" {
				vars["token_id"] = id
			}
		}
		for _, p := range v.check(mt["schema"].(map[string]any), got, method+" "+path) {
			t.Error(p)
		}
	}
	vars["job"], vars["queued"] = job, queued
	var arr api.SubmitAnswer
	resp, err := http.Post(ts.url+"/queue/submit", "application/json", strings.NewReader(`{"command":"x","gpu_count":1,"array":"0-3"}`))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&arr)
	resp.Body.Close()
	vars["array"] = arr.ArrayJobID
	for _, c := range []struct{ method, route, path, body string }{
		{"GET", "/healthz", "/healthz", ""},
		{"POST", "/queue/submit", "/queue/submit", `{"command":"x","gpu_count":1,"env":{"A":"b"},"priority":"high","time_limit":"1h"}`},
		{"POST", "/queue/submit", "/queue/submit", `{"command":"x","gpu_count":1,"array":"0-1"}`},
		{"POST", "/queue/submit", "/queue/submit", `{"command":"x","gpu_count":-1}`},
		{"POST", "/queue/submit", "/queue/submit", `{"command":"x","bogus":1}`},
		{"GET", "/queue", "/queue", ""},
		{"GET", "/queue/statistics", "/queue/statistics", ""},
		{"GET", "/jobs", "/jobs?limit=50", ""},
		{"GET", "/jobs", "/jobs?state=bogus", ""},
		{"GET", "/jobs/{job_id}", "/jobs/{job}", ""},
		{"GET", "/jobs/{job_id}", "/jobs/nosuchjob", ""},
		{"PATCH", "/queue/{job_id}/priority", "/queue/{queued}/priority", `{"priority":"low"}`},
		{"PATCH", "/queue/{job_id}/dependency", "/queue/{queued}/dependency", `{"depends_on":""}`},
		{"GET", "/arrays/{array_id}", "/arrays/{array}", ""},
		{"PATCH", "/arrays/{array_id}", "/arrays/{array}", `{"throttle":2}`},
		{"GET", "/cluster/gpu-status", "/cluster/gpu-status", ""},
		{"GET", "/cluster/nodes", "/cluster/nodes", ""},
		{"GET", "/cluster/nodes/{node_id}/history", "/cluster/nodes/n1/history", ""},
		{"POST", "/cluster/gpu-allocate", "/cluster/gpu-allocate", `{"job_id":"ext1","gpu_count":1}`},
		{"POST", "/cluster/gpu-release", "/cluster/gpu-release", `{"job_id":"ext1"}`},
		{"GET", "/orchestrator/status", "/orchestrator/status", ""},
		{"GET", "/orchestrator/policies", "/orchestrator/policies", ""},
		{"PUT", "/orchestrator/policies", "/orchestrator/policies", `{"aging_interval":"2h"}`},
		{"POST", "/auth/tokens", "/auth/tokens", `{"user":"dana","role":"user"}`},
		{"GET", "/auth/tokens", "/auth/tokens", ""},
		{"DELETE", "/auth/tokens/{id}", "/auth/tokens/{token_id}", ""},
		{"GET", "/auth/whoami", "/auth/whoami", ""},
		{"GET", "/audit", "/audit?limit=5", ""},
		{"GET", "/history", "/history", ""},
		{"GET", "/notify/endpoints", "/notify/endpoints", ""},
		{"GET", "/notifications", "/notifications", ""},
		{"GET", "/reservations", "/reservations", ""},
		{"GET", "/usage", "/usage", ""},
		{"GET", "/prices", "/prices", ""},
		{"PUT", "/prices/{model}", "/prices/H100", `{"dollars_per_hour":2.5}`},
		{"GET", "/budgets", "/budgets", ""},
		{"PUT", "/budgets/{kind}/{name}", "/budgets/user/alice", `{"gpu_hours":100}`},
		{"DELETE", "/queue/{job_id}", "/queue/{queued}", ""},
		{"DELETE", "/queue/{job_id}", "/queue/{job}", ""},
		{"DELETE", "/arrays/{array_id}", "/arrays/{array}", ""},
		{"GET", "/openapi.json", "/openapi.json", ""},
	} {
		call(c.method, c.route, c.path, c.body)
	}
}

// TestOpenAPIQueryParamsDocumented: every query parameter the handlers
// read (q.Get("x"), r.URL.Query().Get("x"), q["x"]) is documented on some
// route, so a new parameter (a logs tail, an all-users switch) cannot be
// left out of the document unnoticed.
func TestOpenAPIQueryParamsDocumented(t *testing.T) {
	documented := map[string]bool{}
	for _, d := range routeDocs() {
		for _, p := range d.query {
			documented[p.name] = true
		}
	}
	// Read by the dashboard's page (GET /, not an API route) and the
	// shell's size loop (its names are map keys, documented as rows, cols).
	notAPI := map[string]bool{"token": true}
	read := regexp.MustCompile(`(?:\bq|Query\(\))\.(?:Get|Has)\("([a-z_]+)"\)|\bq\["([a-z_]+)"\]`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(src), -1) {
			name := m[1] + m[2]
			found++
			if !documented[name] && !notAPI[name] {
				t.Errorf("%s reads the query parameter %q, which no routeDoc documents (openapi_routes.go)", f, name)
			}
		}
	}
	if found < 20 {
		t.Fatalf("found only %d query parameter reads: has the code's style changed?", found)
	}
}
