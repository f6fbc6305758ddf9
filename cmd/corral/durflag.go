package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/timespec"
)

// durationValue is a duration flag read by timespec.Duration, the one
// parser of every duration Corral reads: Go's forms (90s, 2h30m), days
// and weeks (2d, 1w, 1d12h) and Slurm's (1:30:00, 2-00:00:00).
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }

// Set reads s; a negative duration is read too, for the flag's own check
// to refuse with its own words.
func (d *durationValue) Set(s string) error {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	v, err := timespec.Duration(strings.TrimPrefix(t, "-"))
	if err != nil {
		return err
	}
	if neg {
		v = -v
	}
	*d = durationValue(v)
	return nil
}

// durationVar defines a duration flag as pflag's DurationVar does, read
// by timespec.
func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var((*durationValue)(p), name, usage)
}

// normDuration checks a duration given to a flag and returns it for the
// API, which reads it with the same parser, or a usage error naming the
// flag.
func normDuration(flag, s string) (string, error) {
	if _, err := timespec.Duration(s); err != nil {
		return "", usagef("%s: %w", flag, err)
	}
	return strings.TrimSpace(s), nil
}

// normLimit checks a time limit (or estimate) given to a flag, where a
// bare number is minutes, and returns it for the API, where a bare number
// is seconds: a bare number is sent as a duration ("90" is "1h30m0s").
func normLimit(flag, s string) (string, error) {
	d, err := timespec.Limit(s)
	if err != nil {
		return "", usagef("%s: %w", flag, err)
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		return d.String(), nil
	}
	return strings.TrimSpace(s), nil
}
