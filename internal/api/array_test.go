package api

import (
	"slices"
	"strings"
	"testing"
)

func TestParseArray(t *testing.T) {
	seq := func(lo, hi, step int) []int {
		var out []int
		for i := lo; i <= hi; i += step {
			out = append(out, i)
		}
		return out
	}
	cases := []struct {
		in       string
		indexes  []int
		throttle int
		err      string // a part of the error; "" for none
	}{
		{in: "0-99", indexes: seq(0, 99, 1)},
		{in: "0-99:4", indexes: seq(0, 99, 4)},
		{in: "1,5,9-12", indexes: []int{1, 5, 9, 10, 11, 12}},
		{in: "0-999%16", indexes: seq(0, 999, 1), throttle: 16},
		{in: " 7 ", indexes: []int{7}},
		{in: "3-3", indexes: []int{3}},
		{in: "9-12,1,5", indexes: []int{1, 5, 9, 10, 11, 12}},
		{in: "0-9999", indexes: seq(0, 9999, 1)},
		{in: "", err: "is empty"},
		{in: "  ", err: "is empty"},
		{in: "5-1", err: "reversed range"},
		{in: "0-9:0", err: "step must be"},
		{in: "0-9:-2", err: "step must be"},
		{in: "-1", err: "0 or more"},
		{in: "-3-5", err: "0 or more"},
		{in: "1,1", err: "more than once"},
		{in: "0-5,3-8", err: "index 3 more than once"},
		{in: "0-10000", err: "more than 10000 tasks"},
		{in: "0-2147483647", err: "more than 10000 tasks"},
		{in: "0-5000,6000-12000", err: "more than 10000 tasks"},
		{in: "0-9%0", err: "throttle"},
		{in: "0-9%x", err: "throttle"},
		{in: "0-9%-1", err: "throttle"},
		{in: "%4", err: "no indexes"},
		{in: "1,,2", err: "empty item"},
		{in: "a-b", err: "whole numbers"},
		{in: "3:2", err: "needs a range"},
		{in: "99999999999999999999", err: "whole numbers"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseArray(c.in, 0)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseArray(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseArray(%q): %v", c.in, err)
			}
			if !slices.Equal(got.Indexes, c.indexes) || got.Throttle != c.throttle {
				t.Fatalf("ParseArray(%q) = %v %%%d; want %v %%%d", c.in, got.Indexes, got.Throttle, c.indexes, c.throttle)
			}
		})
	}
}

func TestParseArrayCap(t *testing.T) {
	if _, err := ParseArray("0-99", 50); err == nil || !strings.Contains(err.Error(), "more than 50") {
		t.Fatalf("a 100-task array under a cap of 50: %v", err)
	}
	if s, err := ParseArray("0-49", 50); err != nil || len(s.Indexes) != 50 {
		t.Fatalf("a 50-task array under a cap of 50: %v, %d", err, len(s.Indexes))
	}
}

// FuzzParseArray: no input crashes the parser, and what it accepts is
// ascending, distinct, within the cap and never negative.
func FuzzParseArray(f *testing.F) {
	for _, s := range []string{"0-99", "0-99:4", "1,5,9-12", "0-999%16", "5-1", "1,1", "%", "0-9:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseArray(s, 1000)
		if err != nil {
			return
		}
		if len(spec.Indexes) == 0 || len(spec.Indexes) > 1000 || spec.Throttle < 0 {
			t.Fatalf("ParseArray(%q) = %d indexes, throttle %d", s, len(spec.Indexes), spec.Throttle)
		}
		for i, x := range spec.Indexes {
			if x < 0 || (i > 0 && x <= spec.Indexes[i-1]) {
				t.Fatalf("ParseArray(%q): indexes not ascending and distinct: %v", s, spec.Indexes)
			}
		}
	})
}
