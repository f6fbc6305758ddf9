package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

func TestCheckJSON(t *testing.T) {
	for name, tc := range map[string]struct {
		body   string
		status int    // 0: accepted
		field  string // the field the refusal names
	}{
		"plain":                     {body: `{"command":"echo hé ✓","env":{"A":"1"},"gpu_count":1}`},
		"same key in two objects":   {body: `{"env":{"A":"1"},"labels":{"A":"1"}}`},
		"same key in array objects": {body: `[{"a":1},{"a":2}]`},
		"nested objects, own keys":  {body: `{"a":{"a":{"a":1}},"b":[]}`},
		"escaped U+FFFD is text":    {body: `{"command":"\ufffd and \uFFFD and ` + "\uFFFD" + `"}`},
		"valid surrogate pair":      {body: `{"command":"\ud83d\ude00"}`},
		"not JSON: left to decoder": {body: `{"command":`},
		"duplicate top-level key":   {body: `{"gpu_count":1,"gpu_count":8}`, status: 400, field: "gpu_count"},
		"duplicate env key":         {body: `{"command":"x","env":{"HF_TOKEN":"a","HF_TOKEN":"b"}}`, status: 400, field: "env.HF_TOKEN"},
		"duplicate after nesting":   {body: `{"env":{"A":"1"},"x":[1,{"y":2}],"env":{}}`, status: 400, field: "env"},
		"duplicate escaped alike":   {body: `{"user":"a","\u0075ser":"b"}`, status: 400, field: "user"},
		"invalid UTF-8 in command":  {body: "{\"command\":\"echo \xff\xfe\"}", status: 422, field: "command"},
		"invalid UTF-8 in env":      {body: "{\"env\":{\"K\":\"\xc3\x28\"}}", status: 422, field: "env.K"},
		"invalid UTF-8 in env key":  {body: "{\"env\":{\"K\xff\":\"v\"}}", status: 422, field: "env"},
		"invalid UTF-8 in array":    {body: "{\"labels\":[\"ok\",\"\xed\xa0\x80\"]}", status: 422, field: "labels"},
		"lone surrogate escape":     {body: `{"name":"a\ud800b"}`, status: 422, field: "name"},
		"high surrogate at the end": {body: `{"name":"a\ud800"}`, status: 422, field: "name"},
		"high then not a low one":   {body: `{"name":"\ud800\u0041"}`, status: 422, field: "name"},
		"low surrogate alone":       {body: `{"env":{"K":"\uDC00"}}`, status: 422, field: "env.K"},
		"escaped backslash, not u":  {body: `{"command":"echo \\ud800"}`},
		"a control character":       {body: "{\"command\":\"a\x01b\"}"}, // not JSON: the decoder's to report
		"many keys, one twice":      {body: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"a":19}`, status: 400, field: "a"},
		"many keys, each once":      {body: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19}`},
		"too deep":                  {body: strings.Repeat("[", 1001) + strings.Repeat("]", 1001), status: 400, field: ""},
		"too deep in objects":       {body: strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001), status: 400, field: strings.Repeat("a.", 999) + "a"},
		"lone surrogate in a key":   {body: `{"env":{"\ud800":"v"}}`, status: 422, field: "env"},
		"a bare lone surrogate":     {body: `"\udc00"`, status: 422, field: "body"},
		"high, then a bad escape":   {body: `{"name":"\ud800\u12G4"}`}, // not JSON: the decoder's to report
		"a bad escape":              {body: `{"name":"\x"}`},
		"not UTF-8 outside strings": {body: "{\"a\":1 \xff}"},
		"UTF-8 cut at the end":      {body: "{\"a\":\"\xc3"},
		"duplicate in array object": {body: `{"x":[1,{"a":1,"a":2}]}`, status: 400, field: "x.a"},
		"duplicate key, / and ~":    {body: `{"env":{"a/b~c":"1","a/b~c":"2"}}`, status: 400, field: "env.a/b~c"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkJSON([]byte(tc.body), nil)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want status %d naming %q", tc.status, tc.field)
			}
			e := api.AsError(err)
			if e.Status != tc.status || e.Field != tc.field {
				t.Fatalf("got %v (status %d, field %q), want status %d naming %q", err, e.Status, e.Field, tc.status, tc.field)
			}
		})
	}
}

// TestDecodeRefusesWhatJSONRewrites: through the API, a duplicate key or
// invalid UTF-8 in any request body is refused and changes nothing; the
// command is never stored rewritten.
func TestDecodeRefusesWhatJSONRewrites(t *testing.T) {
	e := newAuthEnv(t)
	for _, tc := range []struct {
		caller, method, path, body string
		status                     int
		field                      string
		headers                    map[string]string
	}{
		{"owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0}`, 400, "Idempotency-Key", map[string]string{"Idempotency-Key": "k\xff"}},
		{"owner", "POST", "/queue/submit", "{\"command\":\"echo \xff\",\"gpu_count\":0}", 422, "command", nil},
		{"owner", "POST", "/queue/submit", "{\"command\":\"true\",\"name\":\"n\xc0\",\"gpu_count\":0}", 422, "name", nil},
		{"owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"gpu_count":0}`, 400, "gpu_count", nil},
		{"owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"user":"alice","user":"bob"}`, 400, "user", nil},
		{"owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0,"GPU_COUNT":8}`, 400, "GPU_COUNT", nil},
		{"owner", "POST", "/cluster/gpu-allocate", `{"job_id":"a","job_id":"b","gpu_count":1}`, 400, "job_id", nil},
		{"admin", "POST", "/auth/tokens", `{"user":"dan","role":"viewer","role":"admin"}`, 400, "role", nil},
		{"admin", "PUT", "/orchestrator/policies", `{"backfill":true,"backfill":false}`, 400, "backfill", nil},
	} {
		resp, b := e.do(tc.caller, tc.method, tc.path, tc.body, tc.headers)
		var eb api.ErrorBody
		if resp.StatusCode != tc.status || json.Unmarshal(b, &eb) != nil || eb.Error.Field != tc.field {
			t.Errorf("%s %s %q: %d %s, want %d naming %q", tc.method, tc.path, tc.body, resp.StatusCode, b, tc.status, tc.field)
		}
	}
	if jobs := e.o.Jobs(orchestrator.JobFilter{}); len(jobs) != 0 {
		t.Fatalf("a refused submission made jobs: %+v", jobs)
	}
	for _, tok := range e.a.List() {
		if tok.User == "dan" {
			t.Fatalf("a refused token request made a token: %+v", tok)
		}
	}
}

// TestCheckJSONFieldCase: encoding/json matches struct fields without
// regard to case, so "Command" or "GPU_COUNT" would fill (or, after the
// canonical key, silently replace) a field; checkJSON refuses them for
// structs and keeps map keys (env) case-sensitive.
func TestCheckJSONFieldCase(t *testing.T) {
	type inner struct {
		Port int `json:"port"`
	}
	type withEmbedded struct {
		inner
		Name string `json:"name"`
	}
	for name, tc := range map[string]struct {
		body  string
		into  any
		field string // "": accepted
	}{
		"canonical":                 {`{"command":"true","gpu_count":1,"env":{"A":"1"}}`, &api.SubmitRequest{}, ""},
		"env keys differ in case":   {`{"command":"true","env":{"http_proxy":"a","HTTP_PROXY":"b"}}`, &api.SubmitRequest{}, ""},
		"a field in another case":   {`{"Command":"true"}`, &api.SubmitRequest{}, "Command"},
		"a case twin of a field":    {`{"gpu_count":1,"GPU_COUNT":8}`, &api.SubmitRequest{}, "GPU_COUNT"},
		"a Unicode case twin":       {`{"user":"a","uſer":"b"}`, &api.SubmitRequest{}, "uſer"}, // ſ folds to s
		"nested in a struct":        {`{"weights":{"users":{"Alice":2,"alice":3}}}`, &api.PoliciesUpdate{}, ""},
		"a nested field's case":     {`{"weights":{"Users":{}}}`, &api.PoliciesUpdate{}, "weights.Users"},
		"embedded fields are own":   {`{"port":1,"name":"x"}`, &withEmbedded{}, ""},
		"embedded field's case":     {`{"Port":1}`, &withEmbedded{}, "Port"},
		"an escaped case twin":      {`{"\u0047PU_COUNT":8}`, &api.SubmitRequest{}, "GPU_COUNT"},
		"in an array of structs":    {`[{"port":1},{"PORT":2}]`, &[]inner{}, "PORT"},
		"in a map of structs":       {`{"x":{"port":1},"y":{"Port":2}}`, &map[string]inner{}, "y.Port"},
		"unknown left to DisallowU": {`{"nope":1}`, &api.SubmitRequest{}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkJSON([]byte(tc.body), reflect.TypeOf(tc.into))
			e := &api.Error{}
			if err != nil {
				e = api.AsError(err)
			}
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (err == nil || e.Status != 400 || e.Code != "unknown_field" || e.Field != tc.field):
				t.Fatalf("got %v (%d %s %q), want 400 unknown_field naming %q", err, e.Status, e.Code, e.Field, tc.field)
			}
		})
	}
}

// TestQueryAndRequestIDChecked: a query parameter that is not valid UTF-8
// is refused naming it; a request id that is not printable ASCII is not
// echoed back (nor logged) but replaced by the server's own.
func TestQueryAndRequestIDChecked(t *testing.T) {
	e := newAuthEnv(t)
	for _, path := range []string{"/jobs?user=%ff", "/audit?action=a%c0", "/jobs/x/logs?follow=%fe"} {
		resp, b := e.do("admin", "GET", path, "", nil)
		var eb api.ErrorBody
		if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field == "" {
			t.Errorf("GET %s: %d %s, want 422 naming the parameter", path, resp.StatusCode, b)
		}
	}
	for id, kept := range map[string]bool{"abc-123": true, "caf\xc3\xa9": false, "x\xff": false} {
		resp, _ := e.do("viewer", "GET", "/healthz", "", map[string]string{"X-Request-Id": id})
		if got := resp.Header.Get("X-Request-Id"); (got == id) != kept || got == "" {
			t.Errorf("X-Request-Id %q came back as %q", id, got)
		}
	}
}

// TestCheckJSONNeverPanics runs checkJSON over every prefix of a few
// bodies and over every one-byte change of them to the bytes that steer
// a JSON scanner: it must answer, never panic or read past the end.
func TestCheckJSONNeverPanics(t *testing.T) {
	seeds := []string{
		`{"name":"n","command":"echo \"hi\" \\ \u00e9 \ud83d\ude00","env":{"A":"1","\u0042":"2"},"gpu_count":2,"node_labels":{"x":"y"},"priority":"high"}`,
		`[{"a":[1,2,{"b":null}]},true,false,-1.5e3,"s"]`,
		`{"weights":{"users":{"alice":2}},"quotas":{"projects":{"nlp":8}}}`,
	}
	special := []byte{'"', '\\', '{', '}', '[', ']', ':', ',', 'u', 0xff, 0xc3, 0x01, ' '}
	for _, seed := range seeds {
		for _, typ := range []reflect.Type{nil, reflect.TypeOf(&api.SubmitRequest{}), reflect.TypeOf(&api.PoliciesUpdate{})} {
			for n := range len(seed) + 1 {
				checkJSON([]byte(seed[:n]), typ)
			}
			b := []byte(seed)
			for i := range b {
				orig := b[i]
				for _, c := range special {
					b[i] = c
					checkJSON(b, typ)
				}
				b[i] = orig
			}
		}
	}
}
