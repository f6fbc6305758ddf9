package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
)

// classIdleFlags are corral policy set's flags for the idle reclaim of an
// interactive class (docs/interactive.md).
type classIdleFlags struct {
	class           string
	threshold       int
	window, warnFor string
}

func (f *classIdleFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.class, "class", "", "the interactive class that --class-idle-* set: interactive or interactive-preemptible")
	fl.IntVar(&f.threshold, "class-idle-threshold", 0, "with --class: GPU utilization (percent) under which the class's jobs count as idle")
	fl.StringVar(&f.window, "class-idle-window", "", "with --class: a job of the class idle this long (nothing attached, GPUs quiet) ends with reason idle (e.g. 1h; 0: never)")
	fl.StringVar(&f.warnFor, "class-idle-warn", "", "with --class: its owner is warned this long before (e.g. 10m)")
}

// update adds the class's changes to u; changed reports whether any flag
// was given.
func (f *classIdleFlags) update(cmd *cobra.Command, u *api.PoliciesUpdate) (changed bool, err error) {
	fl := cmd.Flags()
	given := fl.Changed("class-idle-threshold") || fl.Changed("class-idle-window") || fl.Changed("class-idle-warn")
	if !given {
		if fl.Changed("class") {
			return false, usagef("--class needs --class-idle-threshold, --class-idle-window or --class-idle-warn")
		}
		return false, nil
	}
	if f.class != api.ClassInteractive && f.class != api.ClassInteractivePreemptible {
		return false, usagef("--class-idle-* need --class interactive or --class interactive-preemptible")
	}
	var cu api.ClassIdleUpdate
	if fl.Changed("class-idle-threshold") {
		v := f.threshold
		cu.IdleThreshold = &v
	}
	for _, d := range []struct {
		name, v string
		dst     *api.RawValue
	}{{"class-idle-window", f.window, &cu.IdleWindow}, {"class-idle-warn", f.warnFor, &cu.IdleWarn}} {
		if !fl.Changed(d.name) {
			continue
		}
		v, err := normDuration("--"+d.name, d.v) // durflag.go
		if err != nil {
			return false, err
		}
		*d.dst = rawString(v)
	}
	u.Classes = map[string]api.ClassIdleUpdate{f.class: cu}
	return true, nil
}

// printClassIdle writes the interactive classes' idle reclaim settings.
func printClassIdle(w io.Writer, p api.Policies) error {
	t := newTable(w)
	for _, c := range []string{api.ClassInteractive, api.ClassInteractivePreemptible} {
		ci, ok := p.Classes[c]
		switch {
		case !ok:
		case ci.IdleWindow == 0:
			t.row("idle reclaim, "+c+":", "off")
		default:
			t.row("idle reclaim, "+c+":", fmt.Sprintf("nothing attached and under %d%% for %s; warned %s before",
				ci.IdleThreshold, fmtDuration(ci.IdleWindow.Duration()), fmtDuration(ci.IdleWarn.Duration())))
		}
	}
	return t.flush()
}

// showInteractive adds a job's class, hold and idle reclaim warning to
// corral show.
func showInteractive(j api.Job, kv func(k, v string), now time.Time) {
	if j.Class != "" {
		kv("Class", j.Class)
	}
	if j.Hold != "" {
		kv("Hold", j.Hold+" (a hold queued with --wait; corral release "+j.ID+" ends it)")
	}
	if j.IdleEndsAt != nil && !j.State.Terminal() {
		kv("Idle", "nothing attached and GPUs quiet: ends "+fmtTimeFull(*j.IdleEndsAt, now)+" unless used")
	}
}
