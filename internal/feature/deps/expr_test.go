package deps

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	ok := map[string]struct {
		in   string
		want Expr
	}{
		"blank":          {"  ", Expr{}},
		"afterok":        {"afterok:j01", Expr{Terms: []Term{{AfterOK, []string{"j01"}}}}},
		"several ids":    {"afterok:a:b:c", Expr{Terms: []Term{{AfterOK, []string{"a", "b", "c"}}}}},
		"all of":         {"afterok:a,afternotok:b,afterany:c", Expr{Terms: []Term{{AfterOK, []string{"a"}}, {AfterNotOK, []string{"b"}}, {AfterAny, []string{"c"}}}}},
		"any of":         {"afterok:a?afternotok:b", Expr{Any: true, Terms: []Term{{AfterOK, []string{"a"}}, {AfterNotOK, []string{"b"}}}}},
		"after":          {"after:x_1", Expr{Terms: []Term{{After, []string{"x_1"}}}}},
		"aftercorr":      {"aftercorr:arr", Expr{Terms: []Term{{AfterCorr, []string{"arr"}}}}},
		"singleton":      {"singleton", Expr{Terms: []Term{{Kind: Singleton}}}},
		"singleton and":  {"singleton,afterok:a", Expr{Terms: []Term{{Kind: Singleton}, {AfterOK, []string{"a"}}}}},
		"spaces trimmed": {" afterok: a : b , singleton ", Expr{Terms: []Term{{AfterOK, []string{"a", "b"}}, {Kind: Singleton}}}},
	}
	for name, c := range ok {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(c.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.in, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
			}
			again, err := Parse(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("Parse(String()) = %+v, %v; want %+v", again, err, got)
			}
		})
	}

	bad := map[string]struct{ in, msg string }{
		"mixed":           {"afterok:a,afterany:b?after:c", "mixes ','"},
		"unknown kind":    {"afterfoo:a", `"afterfoo" is not a dependency type`},
		"upper case":      {"AFTEROK:a", "is not a dependency type"},
		"no ids":          {"afterok", "afterok needs at least one job id"},
		"empty id":        {"afterok:a::b", "an empty job id"},
		"trailing colon":  {"afterok:a:", "an empty job id"},
		"empty term":      {"afterok:a,", "term 2: is empty"},
		"any empty term":  {"?afterok:a", "term 1: is empty"},
		"singleton ids":   {"singleton:a", "singleton takes no job ids"},
		"delay":           {"after:a+10", "a delay (+time) is not supported"},
		"bad char":        {"afterok:a;rm", "holds ';'"},
		"long id":         {"afterok:" + strings.Repeat("a", MaxIDLen+1), "longer than 128"},
		"too many ids":    {"afterok" + strings.Repeat(":a", MaxIDs+1), "more than 1000 job ids"},
		"only separators": {",", "term 1: is empty"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(c.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", c.in, got)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Parse(%q) error %q, want it to say %q", c.in, err, c.msg)
			}
		})
	}
}

// FuzzParse: whatever Parse accepts, String writes back in a form Parse
// reads as the same expression; nothing panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"afterok:a:b", "afterok:a?afterany:b", "singleton,after:x", "aftercorr:a_1", "", ",?:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(e.String())
		if err != nil {
			t.Fatalf("Parse(%q) ok but its String %q is refused: %v", s, e.String(), err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip of %q: %+v != %+v", s, again, e)
		}
	})
}
