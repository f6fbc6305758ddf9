// Package jsonschema builds JSON Schemas (draft 2020-12, the dialect of
// OpenAPI 3.1) for Go types by reflection, describing what encoding/json
// writes and reads for them. Named struct types become components
// referenced with $ref, so a document built from many types names each
// type once.
//
// The mapping follows encoding/json:
//
//   - a field's name is its json tag's (or the Go name); "-" drops it;
//     omitempty or omitzero makes it optional, every other field is
//     required (encoding/json always writes it);
//   - pointers are nullable; so are slices and maps without omitempty
//     (a nil one is written as null);
//   - time.Time is a date-time string, []byte a base64 string,
//     json.RawMessage and interfaces any value;
//   - embedded structs without a tag have their fields inlined;
//   - a type with its own MarshalJSON or UnmarshalJSON must be given its
//     schema with Define (Reflector.Err reports one that was not).
//
// A Reflector is not safe for concurrent use.
package jsonschema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Schema is one JSON Schema object.
type Schema = map[string]any

// FieldFunc may give a struct field a schema of its own (ok true) instead
// of its type's; name is the field's JSON name.
type FieldFunc func(owner reflect.Type, f reflect.StructField, name string) (s Schema, ok bool)

// Reflector turns Go types into schemas, collecting named structs as
// components. Create it with New.
type Reflector struct {
	// RefPrefix is put before a component's name in $ref
	// ("#/components/schemas/" by default).
	RefPrefix string
	// Field, when set, is asked about every struct field first.
	Field FieldFunc

	defined    map[reflect.Type]Schema
	renamed    map[reflect.Type]string
	components map[string]Schema
	names      map[reflect.Type]string
	errs       []error
}

// New returns a Reflector with no components.
func New() *Reflector {
	return &Reflector{
		RefPrefix:  "#/components/schemas/",
		defined:    map[reflect.Type]Schema{},
		renamed:    map[reflect.Type]string{},
		components: map[string]Schema{},
		names:      map[reflect.Type]string{},
	}
}

// Define gives t the schema s wherever t appears (a pointer to t is s,
// nullable). Use it for types with their own JSON encoding and for enums.
func (r *Reflector) Define(t reflect.Type, s Schema) { r.defined[t] = s }

// Name gives t's component the name name instead of its Go name.
func (r *Reflector) Name(t reflect.Type, name string) { r.renamed[t] = name }

// Enum defines t (a string type) as one of values.
func Enum[T ~string](r *Reflector, values []T, description string) {
	var zero T
	vals := make([]any, len(values))
	for i, v := range values {
		vals[i] = string(v)
	}
	s := Schema{"type": "string", "enum": vals}
	if description != "" {
		s["description"] = description
	}
	r.Define(reflect.TypeOf(zero), s)
}

// Components returns the named schemas collected so far, by name.
func (r *Reflector) Components() map[string]Schema { return r.components }

// Err reports the types that could not be described (a custom JSON
// encoding without a Define, a channel, a function), or nil.
func (r *Reflector) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("jsonschema: %w", joinErrs(r.errs))
}

func joinErrs(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// For returns the schema of values of v's type: a $ref for a named
// struct (adding it to the components), an inline schema otherwise.
func (r *Reflector) For(v any) Schema { return r.Of(reflect.TypeOf(v)) }

// Of is For with the type given.
func (r *Reflector) Of(t reflect.Type) Schema {
	if t == nil {
		return Schema{}
	}
	if s, ok := r.defined[t]; ok {
		return clone(s)
	}
	switch t {
	case reflect.TypeFor[time.Time]():
		return Schema{"type": "string", "format": "date-time"}
	case reflect.TypeFor[json.RawMessage]():
		return Schema{}
	case reflect.TypeFor[time.Duration]():
		return Schema{"type": "integer", "description": "a duration in nanoseconds"}
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && customJSON(t) {
		r.errs = append(r.errs, fmt.Errorf("%s has its own JSON encoding: Define its schema", t))
		return Schema{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return Nullable(r.Of(t.Elem()))
	case reflect.Bool:
		return Schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Schema{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Schema{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}
	case reflect.String:
		return Schema{"type": "string"}
	case reflect.Interface:
		return Schema{}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return Schema{"type": "string", "contentEncoding": "base64"}
		}
		return Schema{"type": "array", "items": r.Of(t.Elem())}
	case reflect.Map:
		return Schema{"type": "object", "additionalProperties": r.Of(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return r.object(t)
		}
		name, ok := r.names[t]
		if !ok {
			name = r.componentName(t)
			r.names[t] = name
			r.components[name] = Schema{} // a placeholder against recursion
			r.components[name] = r.object(t)
		}
		return Schema{"$ref": r.RefPrefix + name}
	}
	r.errs = append(r.errs, fmt.Errorf("%s (%s) has no JSON form", t, t.Kind()))
	return Schema{}
}

// componentName is t's name, or its package's name and its own when
// another type of that name is already a component.
func (r *Reflector) componentName(t reflect.Type) string {
	if n, ok := r.renamed[t]; ok {
		return n
	}
	name := sanitize(shortGeneric(t.Name()))
	if _, taken := r.components[name]; !taken {
		return name
	}
	pkg := t.PkgPath()
	if i := strings.LastIndex(pkg, "/"); i >= 0 {
		pkg = pkg[i+1:]
	}
	name = sanitize(strings.ToUpper(pkg[:1]) + pkg[1:] + t.Name())
	for i := 2; ; i++ {
		if _, taken := r.components[name]; !taken {
			return name
		}
		name = fmt.Sprintf("%s%d", strings.TrimRight(name, "0123456789"), i)
	}
}

// shortGeneric turns a generic type's name, ListDelta[example.com/x/api.Job],
// into ListDelta_Job.
func shortGeneric(name string) string {
	base, args, ok := strings.Cut(name, "[")
	if !ok {
		return name
	}
	var parts []string
	for _, a := range strings.Split(strings.TrimSuffix(args, "]"), ",") {
		if i := strings.LastIndexAny(a, "./"); i >= 0 {
			a = a[i+1:]
		}
		parts = append(parts, a)
	}
	return base + "_" + strings.Join(parts, "_")
}

func sanitize(s string) string {
	return strings.Map(func(c rune) rune {
		if c == '_' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return c
		}
		return '_'
	}, s)
}

// object is a struct's schema: its fields as encoding/json sees them.
func (r *Reflector) object(t reflect.Type) Schema {
	props := Schema{}
	var required []string
	r.fields(t, t, props, &required, map[string]bool{})
	s := Schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// fields adds t's fields to props, inlining embedded structs; owner is the
// outermost struct (for Field). seen holds the names already given, as
// an outer field hides an embedded one of the same name.
func (r *Reflector) fields(owner, t reflect.Type, props Schema, required *[]string, seen map[string]bool) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" || !hasTag {
			name = f.Name
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		optional := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		var s Schema
		if r.Field != nil {
			if fs, ok := r.Field(owner, f, name); ok {
				s = fs
			}
		}
		if s == nil {
			switch {
			case hasOpt(opts, "string") && isScalar(f.Type):
				s = Schema{"type": "string"}
			default:
				s = r.Of(f.Type)
				if !optional && (f.Type.Kind() == reflect.Slice || f.Type.Kind() == reflect.Map) && f.Type.Elem().Kind() != reflect.Uint8 {
					s = Nullable(s)
				}
			}
		}
		props[name] = s
		if !optional {
			*required = append(*required, name)
		}
	}
	for _, et := range embedded {
		r.fields(owner, et, props, required, seen)
	}
}

func hasOpt(opts, want string) bool {
	return slices.Contains(strings.Split(opts, ","), want)
}

func isScalar(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

var (
	marshalerType       = reflect.TypeFor[json.Marshaler]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// customJSON reports whether t (or *t) encodes or decodes itself.
func customJSON(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(marshalerType) || p.Implements(marshalerType) ||
		p.Implements(unmarshalerType) ||
		(t.Kind() != reflect.String && (t.Implements(textMarshalerType) || p.Implements(textUnmarshalerType)))
}

// Nullable returns s allowing null as well.
func Nullable(s Schema) Schema {
	s = clone(s)
	switch typ := s["type"].(type) {
	case string:
		s["type"] = []any{typ, "null"}
		if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, any(nil)) {
			s["enum"] = append(slices.Clone(enum), nil)
		}
		return s
	case []any:
		if !slices.Contains(typ, any("null")) {
			s["type"] = append(slices.Clone(typ), "null")
		}
		return s
	}
	if len(s) == 0 {
		return s // any value, null included
	}
	return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
}

// clone copies s's top level, so that a caller changing it leaves the
// original alone.
func clone(s Schema) Schema {
	out := make(Schema, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}
