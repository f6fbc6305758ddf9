package timespec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PointForms names the time-point forms At accepts; every error says it.
const PointForms = "now, now+2hours (or +30min, +90s, +1d, +1w, +1h30m), 16:00 or 16:00:30 (today, or tomorrow once past), " +
	"today, tomorrow, midnight, noon, fika (15:00), teatime (16:00), 2026-12-01, 2026-12-01T10:00[:SS], " +
	"12/01 or 12/01/26, or an RFC 3339 time"

// PointError is At's error.
type PointError struct{ Input string }

func (e *PointError) Error() string {
	in := e.Input
	if len(in) > 40 {
		in = in[:40] + "..."
	}
	return fmt.Sprintf("%q is not a time: want %s", in, PointForms)
}

func (e *PointError) Unwrap() error { return ErrSyntax }

// relUnits are the units of now+COUNT (Slurm's, with the short forms);
// a bare count is seconds, as in Slurm.
var relUnits = map[string]time.Duration{
	"": time.Second, "s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": Day, "day": Day, "days": Day, "w": Week, "week": Week, "weeks": Week,
}

// At reads a time point as sbatch --begin does, in now's location: now,
// now+COUNT[UNIT], a time of day (today, or tomorrow when it has passed),
// today, tomorrow, midnight, noon, fika, teatime, a date, a date and
// time, MM/DD[/YY], or RFC 3339.
func At(s string, now time.Time) (time.Time, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	fail := func() (time.Time, error) { return time.Time{}, &PointError{Input: s} }
	loc := now.Location()
	day := func(offset int) time.Time {
		y, m, d := now.Date()
		return time.Date(y, m, d+offset, 0, 0, 0, 0, loc)
	}
	// next is the first time at hh:mm:ss from now on (today or tomorrow).
	next := func(h, m, sec int) time.Time {
		at := day(0).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
		if at.Before(now) {
			at = day(1).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
		}
		return at
	}
	switch t {
	case "":
		return fail()
	case "now":
		return now, nil
	case "today":
		return day(0), nil
	case "tomorrow":
		return day(1), nil
	case "midnight":
		return day(1), nil
	case "noon":
		return next(12, 0, 0), nil
	case "fika":
		return next(15, 0, 0), nil
	case "teatime":
		return next(16, 0, 0), nil
	}
	if rest, ok := strings.CutPrefix(t, "now"); ok {
		rest = strings.TrimSpace(rest)
		if len(rest) < 2 || rest[0] != '+' {
			return fail()
		}
		d, ok := relative(strings.TrimSpace(rest[1:]))
		if !ok {
			return fail()
		}
		return now.Add(d), nil
	}
	if h, m, sec, ok := clock(t); ok {
		return next(h, m, sec), nil
	}
	if at, err := time.Parse(time.RFC3339Nano, strings.ToUpper(t)); err == nil {
		return at, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05", "01/02/06", "01/02/2006"} {
		if at, err := time.ParseInLocation(layout, strings.ToUpper(t), loc); err == nil {
			return at, nil
		}
	}
	if at, err := time.ParseInLocation("01/02", t, loc); err == nil { // this year, or next once past
		at = time.Date(now.Year(), at.Month(), at.Day(), 0, 0, 0, 0, loc)
		if at.Before(day(0)) {
			at = at.AddDate(1, 0, 0)
		}
		return at, nil
	}
	return fail()
}

// relative reads the COUNT[UNIT] of now+: "2hours", "30min", "90", or any
// duration Duration reads ("1h30m").
func relative(s string) (time.Duration, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 && i <= 9 {
		if u, ok := relUnits[strings.TrimSpace(s[i:])]; ok {
			n, _ := strconv.Atoi(s[:i])
			return time.Duration(n) * u, true
		}
	}
	d, err := Duration(s)
	return d, err == nil
}

// clock reads HH:MM or HH:MM:SS.
func clock(s string) (h, m, sec int, ok bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, false
	}
	n := make([]int, 3)
	for i, p := range parts {
		if len(p) < 1 || len(p) > 2 {
			return 0, 0, 0, false
		}
		v, ok := whole(p)
		if !ok {
			return 0, 0, 0, false
		}
		n[i] = int(v)
	}
	if n[0] > 23 || n[1] > 59 || n[2] > 59 {
		return 0, 0, 0, false
	}
	return n[0], n[1], n[2], true
}
