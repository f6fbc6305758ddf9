package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

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
//   - a string, key or value, that is not valid UTF-8, or holds a lone
//     UTF-16 surrogate escape (encoding/json rewrites either to U+FFFD):
//     422 invalid_field naming the field that holds it.
//
// The body is read token by token by jsontext's Decoder, which refuses
// duplicate names, invalid UTF-8 and lone surrogates itself; checkJSON
// follows the types alongside for the field-case check and turns the
// decoder's refusals into the API's errors. Paths name object keys
// joined by dots; an array's elements share its path. A body that is
// not JSON at all answers nil: the decoder that follows reports it with
// its usual message.
func checkJSON(body []byte, t reflect.Type) error {
	d := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
	levels := make([]jsonLevel, 0, 8) // the open objects and arrays
	var next reflect.Type             // the type of the value after an object's key
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return refusal(d, body, levels, err)
		}
		depth := d.StackDepth()
		switch kind := tok.Kind(); kind {
		case '{', '[':
			if depth > maxCheckDepth {
				return api.BadRequest("malformed_json", jsonPath(d.StackPointer(), levels), "the body nests deeper than %d levels", maxCheckDepth)
			}
			vt := t
			if n := len(levels); n > 0 {
				vt = levels[n-1].elem(next)
			}
			l := jsonLevel{t: decodedType(vt), array: kind == '['}
			if !l.array && l.t != nil && l.t.Kind() == reflect.Struct {
				l.fields = jsonFields(make([]structField, 0, l.t.NumField()), l.t)
			}
			levels = append(levels, l)
		case '}', ']':
			levels = levels[:len(levels)-1]
		case '"':
			if n := len(levels); n > 0 && levels[n-1].fields != nil {
				if _, length := d.StackIndex(depth); length%2 == 1 { // a key
					if next, err = levels[n-1].field(d, tok.String(), levels); err != nil {
						return err
					}
				}
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// jsonLevel is an object or array checkJSON is in, and the type it is
// decoded into (nil: not followed).
type jsonLevel struct {
	t      reflect.Type
	array  bool
	fields []structField // a struct's, by jsonFields; nil for any other
}

// elem is the type of a value in the level: of an array's elements, or
// in an object, the type after its last key (keyType).
func (l jsonLevel) elem(keyType reflect.Type) reflect.Type {
	if l.t == nil {
		return nil
	}
	switch k := l.t.Kind(); {
	case l.array && (k == reflect.Slice || k == reflect.Array):
		return l.t.Elem()
	case !l.array && k == reflect.Map:
		return l.t.Elem()
	case !l.array && k == reflect.Struct:
		return keyType
	}
	return nil
}

// field is the type of the value of key in the struct l (nil: not
// a field), or the refusal of a key that names a struct field only in
// another case (encoding/json would fill that field: it matches names
// without regard to case). d has just read key.
func (l jsonLevel) field(d *jsontext.Decoder, key string, levels []jsonLevel) (reflect.Type, error) {
	for _, f := range l.fields {
		if f.name == key {
			return f.t, nil
		}
	}
	for _, f := range l.fields {
		if strings.EqualFold(f.name, key) {
			p := jsonPath(d.StackPointer(), levels)
			return nil, api.BadRequest("unknown_field", p, "unknown field %q; field names are case-sensitive: use %q", p, f.name)
		}
	}
	return nil, nil
}

// refusal is checkJSON's answer to the decoder's error err, with levels
// open: the API's error for a duplicate key, invalid UTF-8 or a lone
// surrogate, nil for anything else (not JSON: the decoder after reports
// it).
func refusal(d *jsontext.Decoder, body []byte, levels []jsonLevel, err error) error {
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) || errors.Is(err, io.ErrUnexpectedEOF) || serr.ByteOffset < 0 || serr.ByteOffset > int64(len(body)) {
		return nil
	}
	path := jsonPath(serr.JSONPointer, levels)
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return api.BadRequest("duplicate_key", path, "the key %q appears twice in one object; send each key once", path)
	}
	// jsontext reports invalid UTF-8 and a lone surrogate escape with
	// errors it does not export; they are told by the bytes at the
	// offset it reports, in a string (the token it refused to read).
	at := body[serr.ByteOffset:]
	bad, surrogate := invalidUTF8(at), loneSurrogate(at)
	if !bad && !surrogate || d.PeekKind() != '"' {
		return nil
	}
	field := orBody(path)
	n := len(levels)
	if _, length := d.StackIndex(d.StackDepth()); n > 0 && !levels[n-1].array && length%2 == 0 {
		return api.Invalid(field, "has a key that is not valid UTF-8 text")
	}
	if bad {
		return api.Invalid(field, "is not valid UTF-8; send text as UTF-8")
	}
	return api.Invalid(field, "holds a \\u escape that is not a valid UTF-16 character (a lone surrogate)")
}

// invalidUTF8 reports whether b starts with bytes that are not UTF-8.
func invalidUTF8(b []byte) bool {
	r, size := utf8.DecodeRune(b)
	return r == utf8.RuneError && size == 1
}

// loneSurrogate reports whether b starts with a \u escape of a UTF-16
// surrogate that is not the first of a pair (a high one followed by an
// escaped low one). A high one followed by a \u that is not four hex
// digits is not JSON rather than a lone surrogate.
func loneSurrogate(b []byte) bool {
	r, ok := escapedRune(b)
	switch {
	case !ok || r < 0xD800 || r > 0xDFFF:
		return false
	case r >= 0xDC00: // a low surrogate alone
		return true
	}
	rest := b[6:]
	if len(rest) >= 2 && rest[0] == '\\' && rest[1] == 'u' {
		lo, ok := escapedRune(rest)
		return ok && (lo < 0xDC00 || lo > 0xDFFF)
	}
	return true
}

// escapedRune reads the \uXXXX escape b starts with.
func escapedRune(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	return rune(v), err == nil
}

// jsonPath is the path checkJSON names for the JSON Pointer p into the
// levels open: the object keys it holds, joined by dots, without the
// array indices.
func jsonPath(p jsontext.Pointer, levels []jsonLevel) string {
	var path string
	i := 0
	for tok := range p.Tokens() {
		if i >= len(levels) || !levels[i].array {
			path = joinPath(path, tok)
		}
		i++
	}
	return path
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

// jsonFields appends to dst the fields of struct t that encoding/json
// decodes, by their JSON names, those of embedded structs in their
// place as t's own.
func jsonFields(dst []structField, t reflect.Type) []structField {
	for i := range t.NumField() {
		f := t.Field(i)
		if sub, ok := promoted(f); ok {
			dst = jsonFields(dst, sub)
		} else if name, ok := jsonName(f); ok {
			dst = append(dst, structField{name: name, t: f.Type})
		}
	}
	return dst
}

// structField is a struct field as encoding/json decodes it.
type structField struct {
	name string
	t    reflect.Type
}

// promoted reports whether f is an embedded struct whose fields
// encoding/json treats as its parent's, and returns that struct.
func promoted(f reflect.StructField) (reflect.Type, bool) {
	if !f.Anonymous {
		return nil, false
	}
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" {
		return nil, false
	}
	ft := f.Type
	if ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	return ft, ft.Kind() == reflect.Struct
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

// joinPath is the path of key in the object at path (an array's
// elements, key "", share its path).
func joinPath(path, key string) string {
	switch {
	case key == "":
		return path
	case path == "":
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
