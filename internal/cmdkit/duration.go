package cmdkit

import (
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

// DurationVar defines a duration flag as pflag's DurationVar does, read
// by timespec.
func DurationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var((*durationValue)(p), name, usage)
}
