package main

import (
	"testing"
	"time"
)

// An estimated start shows as a range of clock times where learned run
// times give one, else as how long until it.
func TestFmtEstStart(t *testing.T) {
	now := time.Date(2026, 11, 22, 13, 0, 0, 0, time.Local)
	at := func(h, m int) *time.Time { t := time.Date(2026, 11, 22, h, m, 0, 0, time.Local); return &t }
	tomorrow := time.Date(2026, 11, 23, 9, 5, 0, 0, time.Local)
	for _, c := range []struct {
		name          string
		at, low, high *time.Time
		want          string
	}{
		{"a range", at(14, 50), at(14, 10), at(15, 40), "14:10 to 15:40"},
		{"one time", at(14, 10), at(14, 10), at(14, 10), "in 1h10m"},
		{"no range", at(14, 10), nil, nil, "in 1h10m"},
		{"ends in one minute", at(14, 10), at(14, 10), func() *time.Time { t := at(14, 10).Add(20 * time.Second); return &t }(), "in 1h10m"},
		{"into tomorrow", at(23, 0), at(22, 0), &tomorrow, "22:00 to Nov 23 09:05"},
		{"unknown", nil, nil, nil, "-"},
	} {
		if got := fmtEstStart(nil, c.at, c.low, c.high, now); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}
