package jsonschema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	A int `json:"a"`
}

type Base struct {
	Shared string `json:"shared"`
	Hidden string `json:"outer"` // hidden by the outer field of the same name
}

type custom int

func (custom) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type color string

type List[T any] struct {
	Items []T `json:"items"`
}

type sample struct {
	Base
	Outer    int               `json:"outer"`
	Name     string            `json:"name,omitempty"`
	When     time.Time         `json:"when"`
	Maybe    *time.Time        `json:"maybe,omitempty"`
	Count    *int              `json:"count"`
	Tags     []string          `json:"tags"`
	Opt      []string          `json:"opt,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	Blob     []byte            `json:"blob"`
	Skip     string            `json:"-"`
	private  int
	NoTag    bool
	Num      int64   `json:"num,string"`
	Ratio    float64 `json:"ratio,omitzero"`
	Child    inner   `json:"child"`
	Children []inner `json:"children,omitempty"`
	Ptr      *inner  `json:"ptr,omitempty"`
	Color    color   `json:"color"`
	Any      any     `json:"any"`
	U        uint8   `json:"u"`
}

func TestReflect(t *testing.T) {
	r := New()
	Enum(r, []color{"red", "blue"}, "")
	top := r.For(sample{})
	if top["$ref"] != "#/components/schemas/sample" {
		t.Fatalf("ref = %v", top)
	}
	s := r.Components()["sample"]
	props := s["properties"].(Schema)
	tests := map[string]string{
		"shared":   `{"type":"string"}`,
		"outer":    `{"type":"integer"}`,
		"name":     `{"type":"string"}`,
		"when":     `{"format":"date-time","type":"string"}`,
		"maybe":    `{"format":"date-time","type":["string","null"]}`,
		"count":    `{"type":["integer","null"]}`,
		"tags":     `{"items":{"type":"string"},"type":["array","null"]}`,
		"opt":      `{"items":{"type":"string"},"type":"array"}`,
		"labels":   `{"additionalProperties":{"type":"string"},"type":"object"}`,
		"raw":      `{}`,
		"blob":     `{"contentEncoding":"base64","type":"string"}`,
		"NoTag":    `{"type":"boolean"}`,
		"num":      `{"type":"string"}`,
		"ratio":    `{"type":"number"}`,
		"child":    `{"$ref":"#/components/schemas/inner"}`,
		"children": `{"items":{"$ref":"#/components/schemas/inner"},"type":"array"}`,
		"ptr":      `{"anyOf":[{"$ref":"#/components/schemas/inner"},{"type":"null"}]}`,
		"color":    `{"enum":["red","blue"],"type":"string"}`,
		"any":      `{}`,
		"u":        `{"minimum":0,"type":"integer"}`,
	}
	for name, want := range tests {
		got, err := json.Marshal(props[name])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	for name := range props {
		if _, ok := tests[name]; !ok {
			t.Errorf("unexpected property %s", name)
		}
	}
	req, _ := json.Marshal(s["required"])
	if want := `["outer","when","count","tags","blob","NoTag","num","child","color","any","u","shared"]`; string(req) != want {
		t.Errorf("required = %s, want %s", req, want)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCustomEncodingNeedsDefine(t *testing.T) {
	r := New()
	r.For(struct {
		C custom `json:"c"`
	}{})
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "custom") {
		t.Fatalf("err = %v, want one naming the custom type", err)
	}
	r = New()
	r.Define(reflect.TypeFor[custom](), Schema{"type": "string"})
	got := r.For(struct {
		C *custom `json:"c"`
	}{})
	b, _ := json.Marshal(got)
	if string(b) != `{"properties":{"c":{"type":["string","null"]}},"required":["c"],"type":"object"}` || r.Err() != nil {
		t.Fatalf("got %s, %v", b, r.Err())
	}
}

func TestComponentNames(t *testing.T) {
	tests := []struct {
		name string
		typ  any
		want string
	}{
		{"generic", List[inner]{}, "List_inner"},
		{"plain", inner{}, "inner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			if got := r.For(tt.typ)["$ref"]; got != "#/components/schemas/"+tt.want {
				t.Errorf("ref = %v, want %s", got, tt.want)
			}
		})
	}
	r := New()
	r.Name(reflect.TypeFor[inner](), "Inner")
	if got := r.For(inner{})["$ref"]; got != "#/components/schemas/Inner" {
		t.Errorf("renamed ref = %v", got)
	}
}
