package server

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
)

// maxCheckDepth bounds the nesting checkJSON follows (encoding/json's own
// limit is 10,000; no request of this API nests past a handful).
const maxCheckDepth = 1000

// checkJSON refuses what encoding/json would let through silently when
// it decodes body into a value of type t (nil: no type known):
//
//   - a key that appears twice in one object (encoding/json keeps the
//     last): 400 duplicate_key, naming the key by its path (env.HF_TOKEN);
//   - a key of a struct that names a field only in another case
//     ("Command", "GPU_COUNT"; encoding/json matches field names without
//     regard to case, so {"gpu_count":1,"GPU_COUNT":8} would be a
//     duplicate it keeps the last of): 400 unknown_field naming it. Map
//     keys (env) stay case-sensitive and distinct;
//   - a string, key or value, that is not valid UTF-8 (encoding/json
//     rewrites each bad byte to U+FFFD): 422 invalid_field naming the
//     field that holds it.
//
// It reads body's tokens once with encoding/json's tokenizer and checks
// each token's raw bytes. A body that is not JSON at all answers nil:
// the decoder that follows reports it with its usual message.
func checkJSON(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers are not parsed, only passed over
	type frame struct {
		object bool
		typ    reflect.Type          // the Go type decoded into; nil: unknown
		fields []reflect.StructField // typ's, when it is a struct
		value  reflect.Type          // the type of the current key's value
		path   string                // the path of this object or array
		keys   map[string]bool       // an object's keys so far
		key    string                // an object's current key
		expect bool                  // an object's next token is a key
	}
	var stack []*frame
	var prev int64
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // malformed: left to the decoder's message
		}
		end := dec.InputOffset()
		raw := body[prev:end] // the token and the separators before it, all ASCII but the token
		prev = end
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		_, isString := tok.(string)
		isKey := isString && top != nil && top.object && top.expect
		// The path of the value this token is (or, for a key, of the
		// object that holds it).
		path := ""
		switch {
		case top == nil:
		case isKey || !top.object:
			path = top.path
		default:
			path = joinPath(top.path, top.key)
		}
		if !utf8.Valid(raw) {
			if isKey {
				return api.Invalid(orBody(path), "has a key that is not valid UTF-8")
			}
			return api.Invalid(orBody(path), "is not valid UTF-8; send text as UTF-8")
		}
		if str, ok := tok.(string); ok && replacedSurrogate(raw, str) {
			return api.Invalid(orBody(path), "holds a \\u escape that is not a valid UTF-16 character (a lone surrogate)")
		}
		if isKey {
			k, _ := tok.(string)
			if top.keys[k] {
				return api.BadRequest("duplicate_key", joinPath(path, k), "the key %q appears twice in one object; send each key once", joinPath(path, k))
			}
			if top.keys == nil {
				top.keys = map[string]bool{}
			}
			top.keys[k], top.key, top.expect = true, k, false
			top.value = nil
			switch {
			case top.typ == nil:
			case top.typ.Kind() == reflect.Map:
				top.value = top.typ.Elem()
			case top.typ.Kind() == reflect.Struct:
				f, typ := jsonField(top.fields, k)
				if f != "" && typ == nil {
					return api.BadRequest("unknown_field", joinPath(path, k), "unknown field %q; field names are case-sensitive: use %q", joinPath(path, k), f)
				}
				top.value = typ
			}
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxCheckDepth {
				return api.BadRequest("malformed_json", path, "the body nests deeper than %d levels", maxCheckDepth)
			}
			// The type of this value: the root's, its object's field's
			// or map's element, its array's element.
			var typ reflect.Type
			switch {
			case top == nil:
				typ = t
			case top.object:
				typ = top.value
			case top.typ != nil && (top.typ.Kind() == reflect.Slice || top.typ.Kind() == reflect.Array):
				typ = top.typ.Elem()
			}
			fr := &frame{object: tok == json.Delim('{'), typ: decodedType(typ), path: path, expect: true}
			if fr.object && fr.typ != nil && fr.typ.Kind() == reflect.Struct {
				fr.fields = reflect.VisibleFields(fr.typ)
			}
			stack = append(stack, fr)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the object that holds it expects a key next.
		if len(stack) > 0 {
			stack[len(stack)-1].expect = true
		}
	}
}

// decodedType is the type encoding/json decodes a value of type t as
// (pointers followed), or nil when it is decoded by its own
// UnmarshalJSON or into an interface: what checkJSON then cannot follow.
func decodedType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// jsonField finds the field among fields (a struct's reflect.VisibleFields)
// that encoding/json would decode key into: its JSON name, and its type
// when key spells that name exactly (nil: only in another case). ""
// when there is none. Fields of embedded structs count as the struct's.
func jsonField(fields []reflect.StructField, key string) (string, reflect.Type) {
	name := ""
	for _, f := range fields {
		n, ok := jsonName(f)
		if !ok {
			continue
		}
		if n == key {
			return n, f.Type
		}
		if name == "" && strings.EqualFold(n, key) {
			name = n
		}
	}
	return name, nil
}

// jsonName is the name encoding/json gives a struct field; ok is false
// for a field it does not decode (unexported, "-", an embedded struct
// whose fields are promoted).
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if f.Anonymous && name == "" {
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			return "", false
		}
	}
	if name == "" {
		name = f.Name
	}
	return name, true
}

// replacedSurrogate reports whether encoding/json turned a lone surrogate
// escape (\ud800) of raw into the U+FFFD of s: s has more of them than
// raw spells out, literally or as \ufffd.
func replacedSurrogate(raw []byte, s string) bool {
	if !strings.ContainsRune(s, utf8.RuneError) {
		return false
	}
	spelled := bytes.Count(raw, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
	return strings.Count(s, "\uFFFD") > spelled
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// orBody names the body itself when a path is empty (a bare string).
func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}
