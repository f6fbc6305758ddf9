package timespec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	const m, h = time.Minute, time.Hour
	cases := []struct {
		in   string
		bare Unit
		want time.Duration
		bad  bool
	}{
		// Go's forms, and d and w everywhere.
		{in: "90s", want: 90 * time.Second},
		{in: "2h30m", want: 2*h + 30*m},
		{in: "1.5h", want: 90 * m},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "2d", want: 48 * h},
		{in: "1w", want: 7 * 24 * h},
		{in: "1d12h", want: 36 * h},
		{in: "1w2d3h4m5s", want: 9*24*h + 3*h + 4*m + 5*time.Second},
		{in: "0.5d", want: 12 * h},
		{in: " 30d ", want: 30 * 24 * h},
		{in: "+5m", want: 5 * m},
		// Slurm's forms.
		{in: "0:05", want: 5 * time.Second},
		{in: "10", bare: Minutes, want: 10 * m},
		{in: "90:00", want: 90 * m},
		{in: "1:30:00", want: 90 * m},
		{in: "2-00:00:00", want: 48 * h},
		{in: "1-12", want: 36 * h},
		{in: "1-12:30", want: 36*h + 30*m},
		{in: "0-0:0:1", want: time.Second},
		{in: "5", want: 5 * m, bare: Minutes},
		// A bare number, by the caller's unit.
		{in: "90", bare: Seconds, want: 90 * time.Second},
		{in: "1.5", bare: Seconds, want: 1500 * time.Millisecond},
		{in: "0", bare: Minutes, want: 0},
		{in: "90", bad: true},
		// Refused.
		{in: "", bad: true},
		{in: "-5m", bad: true},
		{in: "-1", bare: Minutes, bad: true},
		{in: "2x", bad: true},
		{in: "d", bad: true},
		{in: "1:2:3:4", bad: true},
		{in: "1-2-3", bad: true},
		{in: "1-", bad: true},
		{in: "a:b", bad: true},
		{in: "1::2", bad: true},
		{in: "1.5:00", bad: true},
		{in: "99999999999999w", bad: true},
		{in: "1e3s", bad: true},
		{in: "NaNs", bad: true},
	}
	for _, c := range cases {
		got, err := Parse(c.in, c.bare)
		if c.bad {
			if err == nil {
				t.Errorf("Parse(%q, %v) = %v, want an error", c.in, c.bare, got)
			} else if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "D-HH:MM:SS") {
				t.Errorf("Parse(%q) error %q does not name the forms", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q, %v) = %v, %v; want %v", c.in, c.bare, got, err, c.want)
		}
	}
}

func TestLimitBareMinutesAndErrorText(t *testing.T) {
	if d, err := Limit("90"); err != nil || d != 90*time.Minute {
		t.Fatalf("Limit(90) = %v, %v; want 90m (Slurm: minutes)", d, err)
	}
	_, err := Limit("soon")
	if err == nil || !strings.Contains(err.Error(), "a bare number is minutes") {
		t.Fatalf("Limit(soon) error %v", err)
	}
	if _, err := Duration("90"); err == nil || !strings.Contains(err.Error(), "needs a unit") {
		t.Fatalf("Duration(90) error %v", err)
	}
}

func TestAt(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	now := time.Date(2026, 3, 10, 14, 20, 0, 0, loc)
	day := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, loc) }
	cases := []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "now", want: now},
		{in: "now+2hours", want: now.Add(2 * time.Hour)},
		{in: "now+30min", want: now.Add(30 * time.Minute)},
		{in: "now+90", want: now.Add(90 * time.Second)},
		{in: "now + 1d", want: now.Add(24 * time.Hour)},
		{in: "now+1h30m", want: now.Add(90 * time.Minute)},
		{in: "now+2weeks", want: now.Add(14 * 24 * time.Hour)},
		{in: "16:00", want: day(10, 16, 0)},
		{in: "09:30", want: day(11, 9, 30)}, // past: tomorrow
		{in: "14:20", want: day(10, 14, 20)},
		{in: "16:00:30", want: day(10, 16, 0).Add(30 * time.Second)},
		{in: "today", want: day(10, 0, 0)},
		{in: "tomorrow", want: day(11, 0, 0)},
		{in: "Tomorrow", want: day(11, 0, 0)},
		{in: "midnight", want: day(11, 0, 0)},
		{in: "noon", want: day(11, 12, 0)},
		{in: "teatime", want: day(10, 16, 0)},
		{in: "fika", want: day(10, 15, 0)},
		{in: "2026-12-01", want: time.Date(2026, 12, 1, 0, 0, 0, 0, loc)},
		{in: "2026-12-01T10:00", want: time.Date(2026, 12, 1, 10, 0, 0, 0, loc)},
		{in: "2026-12-01T10:00:05", want: time.Date(2026, 12, 1, 10, 0, 5, 0, loc)},
		{in: "2026-12-01T10:00:00Z", want: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		{in: "12/01", want: time.Date(2026, 12, 1, 0, 0, 0, 0, loc)},
		{in: "01/02", want: time.Date(2027, 1, 2, 0, 0, 0, 0, loc)},
		{in: "12/01/27", want: time.Date(2027, 12, 1, 0, 0, 0, 0, loc)},
		{in: "", bad: true},
		{in: "now-1h", bad: true},
		{in: "now+", bad: true},
		{in: "now+2fortnights", bad: true},
		{in: "25:00", bad: true},
		{in: "16:60", bad: true},
		{in: "+1:00", bad: true},
		{in: "yesterday", bad: true},
		{in: "2026-13-01", bad: true},
	}
	for _, c := range cases {
		got, err := At(c.in, now)
		if c.bad {
			if err == nil {
				t.Errorf("At(%q) = %v, want an error", c.in, got)
			} else if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "tomorrow") {
				t.Errorf("At(%q) error %q does not name the forms", c.in, err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("At(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// FuzzParse: Parse never panics, never returns a negative duration, and
// agrees with time.ParseDuration wherever that accepts a non-negative
// duration.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"90s", "2h30m", "1d12h", "1w", "0:05", "2-00:00:00", "1-12", "90", "1.5", "-1", "9999999999999w", "1:2:3:4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, u := range []Unit{None, Seconds, Minutes} {
			d, err := Parse(s, u)
			if err == nil && d < 0 {
				t.Fatalf("Parse(%q) = %v, negative", s, d)
			}
			if err != nil && !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q): %v does not wrap ErrSyntax", s, err)
			}
		}
		if want, err := time.ParseDuration(strings.TrimSpace(s)); err == nil && want >= 0 && !strings.HasPrefix(strings.TrimSpace(s), "-") {
			if got, err := Duration(s); err != nil || got != want {
				t.Fatalf("Duration(%q) = %v, %v; time.ParseDuration says %v", s, got, err, want)
			}
		}
	})
}

// FuzzAt: At never panics, and what it refuses is a PointError.
func FuzzAt(f *testing.F) {
	for _, s := range []string{"now+2hours", "16:00", "tomorrow", "2026-12-01T10:00", "12/01/27", "now+1h30m"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 10, 14, 20, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := At(s, now); err != nil && !errors.Is(err, ErrSyntax) {
			t.Fatalf("At(%q): %v", s, err)
		}
	})
}
