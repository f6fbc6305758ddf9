package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 15, 0, 0, time.UTC)
	local := func(y int, m time.Month, d, h, min int) string {
		return time.Date(y, m, d, h, min, 0, 0, time.Local).UTC().Format(time.RFC3339)
	}
	cases := []struct{ in, want, err string }{
		{"now", "2026-11-30T08:15:00Z", ""},
		{" NOW ", "2026-11-30T08:15:00Z", ""},
		{"2026-12-01T09:00:00+02:00", "2026-12-01T07:00:00Z", ""},
		{"2026-12-01 09:00", local(2026, 12, 1, 9, 0), ""},
		{"2026-12-01T09:30", local(2026, 12, 1, 9, 30), ""},
		{"2026-12-01", local(2026, 12, 1, 0, 0), ""},
		{"tomorrow", "", "is not a time"},
		{"2026-13-01 09:00", "", "is not a time"},
	}
	for _, c := range cases {
		got, err := parseWhen(c.in, now)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseWhen(%q) = %q, %v; want an error saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseWhen(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestGPUsText(t *testing.T) {
	if got := runs([]int{0, 1, 2, 3, 6, 8, 9}); got != "0-3,6,8-9" {
		t.Errorf("runs: %q", got)
	}
}
