// Package timespec reads the durations and times people type, in one place
// for the whole of Corral (CLI flags, API fields, batch-script headers):
// Go's forms ("90s", "2h30m") with days and weeks added ("2d", "1w",
// "1d12h"), Slurm's time-limit forms ("MM", "MM:SS", "HH:MM:SS", "D-HH",
// "D-HH:MM", "D-HH:MM:SS"), and Slurm's time points for --begin ("16:00",
// "tomorrow", "now+2hours", "2026-12-01T10:00"). It does no I/O and never
// reads the clock: a time point is read against the now it is given.
package timespec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Forms names the duration forms Parse accepts; every error says it.
const Forms = "a duration such as 90s, 45m, 2h30m, 1d12h or 1w (units ns, us, ms, s, m, h, d, w), " +
	"or Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"

// ErrSyntax is what every parse error wraps.
var ErrSyntax = errors.New("not a valid duration or time")

// Unit says what a bare number means: Minutes for a time limit (Slurm's
// meaning), Seconds for the API's numeric fields, None where a number
// needs a unit.
type Unit time.Duration

// The units a bare number may have.
const (
	None    Unit = 0
	Seconds Unit = Unit(time.Second)
	Minutes Unit = Unit(time.Minute)
)

// Day and Week are the d and w units.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// Error is a parse error: the text, and what a bare number means.
type Error struct {
	Input string
	Bare  Unit
	Why   string // "" or a detail such as "must not be negative"
}

func (e *Error) Error() string {
	in := e.Input
	if len(in) > 40 {
		in = in[:40] + "..."
	}
	msg := fmt.Sprintf("%q is not a duration: want %s", in, Forms)
	switch e.Bare {
	case Minutes:
		msg += "; a bare number is minutes"
	case Seconds:
		msg += "; a bare number is seconds"
	}
	if e.Why != "" {
		msg = fmt.Sprintf("%q %s (want %s)", in, e.Why, Forms)
	}
	return msg
}

func (e *Error) Unwrap() error { return ErrSyntax }

// Limit reads a time limit the way sbatch --time does: Slurm's forms, a
// bare number of minutes, or a Go-style duration with d and w.
func Limit(s string) (time.Duration, error) { return Parse(s, Minutes) }

// Duration reads a duration that needs a unit ("90s", "2d", "1:30:00");
// a bare number is refused, since it could mean seconds or minutes.
func Duration(s string) (time.Duration, error) { return Parse(s, None) }

// Parse reads s as a duration, a bare number counted in bare (None:
// refused). Negative durations and ones past about 290 years are refused.
func Parse(s string, bare Unit) (time.Duration, error) {
	t := strings.TrimSpace(s)
	fail := func(why string) (time.Duration, error) { return 0, &Error{Input: s, Bare: bare, Why: why} }
	switch {
	case t == "":
		return fail("is empty")
	case t[0] == '-':
		return fail("must not be negative")
	case t[0] == '+':
		t = t[1:]
	}
	if isNumber(t) {
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return fail("")
		}
		if bare == None && f != 0 { // 0 needs none, as in Go
			return fail("needs a unit")
		}
		return fromFloat(f*float64(bare), s, bare)
	}
	if strings.ContainsAny(t, ":-") {
		d, ok := slurm(t)
		if !ok {
			return fail("")
		}
		return d, nil
	}
	if d, err := time.ParseDuration(t); err == nil {
		return d, nil // Go's own forms, to the nanosecond
	}
	d, ok := units(t)
	if !ok {
		return fail("")
	}
	return fromFloat(d, s, bare)
}

// fromFloat turns ns into a Duration, refusing what does not fit.
func fromFloat(ns float64, s string, bare Unit) (time.Duration, error) {
	if math.IsNaN(ns) || ns < 0 || ns >= math.MaxInt64 {
		return 0, &Error{Input: s, Bare: bare, Why: "is out of range"}
	}
	return time.Duration(ns), nil
}

// isNumber reports whether s is digits with at most one '.'.
func isNumber(s string) bool {
	dot, digits := false, false
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits
}

// slurm reads Slurm's [D-]... colon forms. Fields are whole numbers of
// any size (Slurm takes "90:00" as 90 minutes).
func slurm(s string) (time.Duration, bool) {
	days := int64(-1)
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, ok := whole(d)
		if !ok {
			return 0, false
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return 0, false
	}
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, ok := whole(p)
		if !ok {
			return 0, false
		}
		nums[i] = n
	}
	var h, m, sec int64
	switch {
	case days < 0 && len(nums) == 1: // MM
		m = nums[0]
	case days < 0 && len(nums) == 2: // MM:SS
		m, sec = nums[0], nums[1]
	case len(nums) == 3: // HH:MM:SS, D-HH:MM:SS
		h, m, sec = nums[0], nums[1], nums[2]
	case len(nums) == 1: // D-HH
		h = nums[0]
	case len(nums) == 2: // D-HH:MM
		h, m = nums[0], nums[1]
	}
	total := float64(max(days, 0))*float64(Day) + float64(h)*float64(time.Hour) +
		float64(m)*float64(time.Minute) + float64(sec)*float64(time.Second)
	if total >= math.MaxInt64 {
		return 0, false
	}
	return time.Duration(max(days, 0))*Day + time.Duration(h)*time.Hour +
		time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, true
}

// whole reads a non-empty string of digits.
func whole(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// unitNS is each unit's length in nanoseconds.
var unitNS = map[string]float64{
	"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9,
	"d": float64(Day), "w": float64(Week),
}

// units reads a sequence of NUMBER UNIT pairs ("1d12h", "1.5h", "2w"),
// returning nanoseconds.
func units(s string) (float64, bool) {
	total := 0.0
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		num := s[:i]
		if !isNumber(num) {
			return 0, false
		}
		j := i
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		u, ok := unitNS[s[i:j]]
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, false
		}
		total += f * u
		s = s[j:]
	}
	return total, true
}
