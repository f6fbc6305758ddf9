package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/timespec"
)

// durationVar defines a duration flag as pflag's DurationVar does, read
// by timespec (cmdkit.DurationVar).
func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	cmdkit.DurationVar(fl, p, name, value, usage)
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
