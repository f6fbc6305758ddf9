package api

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on every time and duration a request may carry (docs/limits.md).
// They are what the store can write and Go can compute with: the store
// keeps times as nanoseconds since 1970 in 64 bits (good to 2262) and as
// RFC 3339 text (good to 9999), and a Go time.Duration spans 292 years.
// A value outside them is refused with 422 naming its field, before
// anything changes; no request can then put a time in memory that a
// commit cannot write.
const (
	// MinYear and MaxYear bound request times: from MinYear-01-01T00:00:00Z
	// to before MaxYear-01-01T00:00:00Z.
	MinYear = 1970
	MaxYear = 2200
	// MaxDuration bounds every duration a request gives (time limits,
	// estimates, booking and hold durations, token lifetimes, policy
	// windows): one year (366 days).
	MaxDuration = 366 * 24 * time.Hour
)

// MinTime is the earliest time a request may give.
func MinTime() time.Time { return time.Date(MinYear, 1, 1, 0, 0, 0, 0, time.UTC) }

// MaxTime is the first time past what a request may give.
func MaxTime() time.Time { return time.Date(MaxYear, 1, 1, 0, 0, 0, 0, time.UTC) }

// TimeInBounds reports whether t is within [MinTime, MaxTime).
func TimeInBounds(t time.Time) bool { return !t.Before(MinTime()) && t.Before(MaxTime()) }

// CheckTime refuses a time outside the bounds, naming field.
func CheckTime(field string, t time.Time) error {
	if TimeInBounds(t) {
		return nil
	}
	return Invalid(field, "%s is outside the times this server accepts (%d-01-01 to before %d-01-01 UTC)",
		truncate(t.UTC().Format(time.RFC3339), 40), MinYear, MaxYear)
}

// ParseTime reads an RFC 3339 time within the bounds, naming field when
// it cannot.
func ParseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, Invalid(field, "%q is not an RFC 3339 time such as 2026-12-01T09:00:00Z", truncate(s, 40))
	}
	if err := CheckTime(field, t); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// CheckDuration refuses a duration below 0 or above MaxDuration, naming
// field.
func CheckDuration(field string, d time.Duration) error {
	if d < 0 || d > MaxDuration {
		return Invalid(field, "%s must be between 0 and %s (one year)", d, MaxDuration)
	}
	return nil
}

// CheckText refuses a string longer than max bytes, or that is not valid
// UTF-8, or that holds a NUL byte (which PostgreSQL cannot store), naming
// field.
func CheckText(field, s string, max int) error {
	switch {
	case len(s) > max:
		return Invalid(field, "is %d bytes long; at most %d are allowed", len(s), max)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return Invalid(field, "must be valid UTF-8 without NUL bytes")
	}
	return nil
}
