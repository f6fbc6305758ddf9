package server

import (
	"bytes"
	"encoding/json"
	"errors"
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
//   - a string, key or value, that is not valid UTF-8, or holds a lone
//     UTF-16 surrogate escape (encoding/json rewrites either to U+FFFD):
//     422 invalid_field naming the field that holds it.
//
// It is one pass over body's bytes that allocates only for an object's
// keys that need unescaping and for the paths of nested objects. A body
// that is not JSON at all answers nil: the decoder that follows reports
// it with its usual message.
func checkJSON(body []byte, t reflect.Type) error {
	c := jsonChecker{b: body}
	err := c.value("", nil, t)
	if errors.Is(err, errMalformed) {
		return nil
	}
	return err
}

// errMalformed stops checkJSON on input that is not JSON, which the
// decoder reports.
var errMalformed = errors.New("malformed JSON")

// jsonChecker is checkJSON's cursor over the body.
type jsonChecker struct {
	b     []byte
	i     int
	depth int
}

func (c *jsonChecker) space() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value checks the value at the cursor: the value of key in the object
// at parent (nil: an element of the array at parent), to be decoded into
// t. The key becomes a string only for a path that is needed.
func (c *jsonChecker) value(parent string, key []byte, t reflect.Type) error {
	c.space()
	if c.i >= len(c.b) {
		return errMalformed
	}
	switch c.b[c.i] {
	case '{', '[':
		if c.depth >= maxCheckDepth {
			return api.BadRequest("malformed_json", joinPath(parent, string(key)), "the body nests deeper than %d levels", maxCheckDepth)
		}
		c.depth++
		defer func() { c.depth-- }()
		path := joinPath(parent, string(key))
		if c.b[c.i] == '{' {
			return c.object(path, decodedType(t))
		}
		return c.array(path, decodedType(t))
	case '"':
		if _, _, err := c.str(); err != nil {
			return err.at(parent, string(key), false)
		}
		return nil
	}
	// A number, true, false or null: the decoder checks it.
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return nil
		}
		c.i++
	}
	return nil
}

// object checks an object whose path is path, decoded into t.
func (c *jsonChecker) object(path string, t reflect.Type) error {
	c.i++ // {
	c.space()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return nil
	}
	keys := make([][]byte, 0, 16) // the keys so far, unescaped
	var many map[string]bool      // past 16 keys, a set instead
	for {
		c.space()
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return errMalformed
		}
		raw, escaped, serr := c.str()
		if serr != nil {
			return serr.at(path, "", true)
		}
		k := raw
		if escaped {
			var s string
			if err := json.Unmarshal(c.b[c.i-len(raw)-2:c.i], &s); err != nil {
				return errMalformed
			}
			k = []byte(s)
		}
		dup := false
		if many != nil {
			dup = many[string(k)]
			many[string(k)] = true
		} else {
			for _, seen := range keys {
				dup = dup || bytes.Equal(seen, k)
			}
			keys = append(keys, k)
			if len(keys) == cap(keys) {
				many = make(map[string]bool, 2*len(keys))
				for _, seen := range keys {
					many[string(seen)] = true
				}
			}
		}
		if dup {
			p := joinPath(path, string(k))
			return api.BadRequest("duplicate_key", p, "the key %q appears twice in one object; send each key once", p)
		}
		var vt reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Map:
				vt = t.Elem()
			case reflect.Struct:
				name, ft := jsonField(t, k)
				if name != "" && ft == nil {
					p := joinPath(path, string(k))
					return api.BadRequest("unknown_field", p, "unknown field %q; field names are case-sensitive: use %q", p, name)
				}
				vt = ft
			}
		}
		c.space()
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return errMalformed
		}
		c.i++
		if err := c.value(path, k, vt); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.b) {
			return errMalformed
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return nil
		default:
			return errMalformed
		}
	}
}

// array checks an array whose path is path, decoded into t.
func (c *jsonChecker) array(path string, t reflect.Type) error {
	c.i++ // [
	var et reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		et = t.Elem()
	}
	c.space()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return nil
	}
	for {
		if err := c.value(path, nil, et); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.b) {
			return errMalformed
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return nil
		default:
			return errMalformed
		}
	}
}

// stringError is what is wrong with a string: not UTF-8, a lone
// surrogate, or not JSON (malformed).
type stringError int

const (
	stringMalformed stringError = iota
	stringNotUTF8
	stringSurrogate
)

// at is the error of a bad string that is the value of key in parent
// (isKey: a key of the object at parent).
func (e stringError) at(parent, key string, isKey bool) error {
	field := orBody(joinPath(parent, key))
	switch {
	case e == stringMalformed:
		return errMalformed
	case isKey:
		return api.Invalid(field, "has a key that is not valid UTF-8 text")
	case e == stringNotUTF8:
		return api.Invalid(field, "is not valid UTF-8; send text as UTF-8")
	}
	return api.Invalid(field, "holds a \\u escape that is not a valid UTF-16 character (a lone surrogate)")
}

// str reads the string at the cursor ("..."): its raw contents, whether
// they hold escapes, or what is wrong with it.
func (c *jsonChecker) str() (raw []byte, escaped bool, err *stringError) {
	bad := func(e stringError) ([]byte, bool, *stringError) { return nil, false, &e }
	c.i++ // "
	start, high := c.i, false
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			raw = c.b[start:c.i]
			c.i++
			if high && !utf8.Valid(raw) {
				return bad(stringNotUTF8)
			}
			return raw, escaped, nil
		case ch < 0x20:
			return bad(stringMalformed)
		case ch >= 0x80:
			high = true
			c.i++
		case ch != '\\':
			c.i++
		default:
			escaped = true
			if c.i+1 >= len(c.b) {
				return bad(stringMalformed)
			}
			if c.b[c.i+1] != 'u' {
				c.i += 2
				continue
			}
			r, ok := hex4(c.b, c.i+2)
			if !ok {
				return bad(stringMalformed)
			}
			c.i += 6
			switch {
			case r >= 0xDC00 && r <= 0xDFFF: // a low surrogate alone
				return bad(stringSurrogate)
			case r >= 0xD800 && r <= 0xDBFF: // a high one needs a low one next
				if c.i+1 >= len(c.b) || c.b[c.i] != '\\' || c.b[c.i+1] != 'u' {
					return bad(stringSurrogate)
				}
				lo, ok := hex4(c.b, c.i+2)
				if !ok {
					return bad(stringMalformed)
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					return bad(stringSurrogate)
				}
				c.i += 6
			}
		}
	}
	return bad(stringMalformed)
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, ch := range b[i : i+4] {
		r <<= 4
		switch {
		case ch >= '0' && ch <= '9':
			r |= rune(ch - '0')
		case ch >= 'a' && ch <= 'f':
			r |= rune(ch - 'a' + 10)
		case ch >= 'A' && ch <= 'F':
			r |= rune(ch - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
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

// jsonField finds the field of struct t that encoding/json would decode
// key into: its JSON name, and its type when key spells that name
// exactly (nil: only in another case, as encoding/json's case folding
// matches it). "" when there is none. Fields of embedded structs count
// as t's own.
func jsonField(t reflect.Type, key []byte) (string, reflect.Type) {
	if name, typ := exactField(t, key); typ != nil {
		return name, typ
	}
	return foldedField(t, string(key)), nil
}

// exactField is the field of struct t whose JSON name is key.
func exactField(t reflect.Type, key []byte) (string, reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if sub, ok := promoted(f); ok {
			if n, typ := exactField(sub, key); typ != nil {
				return n, typ
			}
			continue
		}
		if n, ok := jsonName(f); ok && n == string(key) {
			return n, f.Type
		}
	}
	return "", nil
}

// foldedField is the JSON name of the field of struct t that key matches
// without regard to case, or "".
func foldedField(t reflect.Type, key string) string {
	for i := range t.NumField() {
		f := t.Field(i)
		if sub, ok := promoted(f); ok {
			if n := foldedField(sub, key); n != "" {
				return n
			}
			continue
		}
		if n, ok := jsonName(f); ok && strings.EqualFold(n, key) {
			return n
		}
	}
	return ""
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
