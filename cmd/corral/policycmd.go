package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
)

// policyFlags are the flags of corral policy set.
type policyFlags struct {
	policy                         string
	backfill, preemption, spread   bool
	idleThreshold                  int
	idleAction                     string
	aging, halfLife, estimate      string
	minRunTime, preemptGrace, idle string
	starveAfter, reserveAfter      string
	starveLightDrain               string
	starveLightFloor               string
	starveShare, tailFactor        float64
	tailWait, starveBacklog        float64
	starveLightShare               float64
	oldestFirst                    bool
	classIdle                      classIdleFlags // policyclass.go
}

// durationFlags name the duration knobs: flag, help, and where it goes.
var durationFlags = []struct {
	name, help string
	field      func(*policyFlags) *string
	set        func(*api.PoliciesUpdate, api.RawValue)
}{
	{"aging", "a waiting job gains one priority level per this much waiting (e.g. 2h)", func(f *policyFlags) *string { return &f.aging }, func(u *api.PoliciesUpdate, v api.RawValue) { u.AgingInterval = v }},
	{"half-life", "half-life of past usage in fair share (e.g. 168h)", func(f *policyFlags) *string { return &f.halfLife }, func(u *api.PoliciesUpdate, v api.RawValue) { u.HalfLife = v }},
	{"default-estimate", "run time assumed for a job with no estimate and no history (e.g. 1h)", func(f *policyFlags) *string { return &f.estimate }, func(u *api.PoliciesUpdate, v api.RawValue) { u.DefaultEstimate = v }},
	{"min-run-time", "a job this young is not preempted (e.g. 10m)", func(f *policyFlags) *string { return &f.minRunTime }, func(u *api.PoliciesUpdate, v api.RawValue) { u.MinRunTime = v }},
	{"preempt-grace", "SIGTERM to SIGKILL for a preempted job without its own (e.g. 30s)", func(f *policyFlags) *string { return &f.preemptGrace }, func(u *api.PoliciesUpdate, v api.RawValue) { u.PreemptGrace = v }},
	{"idle-window", "a job whose GPUs stay under the idle threshold this long is flagged idle (e.g. 30m)", func(f *policyFlags) *string { return &f.idle }, func(u *api.PoliciesUpdate, v api.RawValue) { u.IdleWindow = v }},
	{"starve-after", "fair_share: a job waiting this long goes before every job that has not, oldest first (e.g. 48h; 0: never)", func(f *policyFlags) *string { return &f.starveAfter }, func(u *api.PoliciesUpdate, v api.RawValue) { u.StarveAfter = v }},
	{"starve-light-drain", "fair_share: the longest drain time of the queued work at which --starve-light-share applies (e.g. 168h; 0: never)", func(f *policyFlags) *string { return &f.starveLightDrain }, func(u *api.PoliciesUpdate, v api.RawValue) { u.StarveLightDrain = v }},
	{"starve-light-floor", "fair_share: under --starve-light-share, a job starves light once it has waited --starve-after for every week the queue takes to drain, never less than this (e.g. 12h; 0: --starve-after alone)", func(f *policyFlags) *string { return &f.starveLightFloor }, func(u *api.PoliciesUpdate, v api.RawValue) { u.StarveLightFloor = v }},
	{"reserve-after", "fair_share with backfill: a job holds a reservation only once it has waited this long (e.g. 2h; 0: at once)", func(f *policyFlags) *string { return &f.reserveAfter }, func(u *api.PoliciesUpdate, v api.RawValue) { u.ReserveAfter = v }},
}

// numberFlags name the knobs that are plain numbers: flag, help, and
// where it goes. The server checks their bounds.
var numberFlags = []struct {
	name, help string
	field      func(*policyFlags) *float64
	set        func(*api.PoliciesUpdate, *float64)
}{
	{"starve-share", "fair_share: the most of the GPUs that jobs which went first for starving may hold (above 0, at most 1)", func(f *policyFlags) *float64 { return &f.starveShare }, func(u *api.PoliciesUpdate, v *float64) { u.StarveShare = v }},
	{"starve-backlog", "fair_share: a job is starving only once it has also waited this many times the backlog (queued and running work over every GPU; 0: --starve-after alone)", func(f *policyFlags) *float64 { return &f.starveBacklog }, func(u *api.PoliciesUpdate, v *float64) { u.StarveBacklog = v }},
	{"starve-light-share", "fair_share: while the queued work drains within --starve-light-drain, a job that waited --starve-after alone goes first too, while the jobs that went first for starving hold less than this share of the GPUs (0 to 1; 0: never)", func(f *policyFlags) *float64 { return &f.starveLightShare }, func(u *api.PoliciesUpdate, v *float64) { u.StarveLightShare = v }},
	{"tail-factor", "fair_share: a job whose estimate is at least this many times the backlog goes first, the longest first (0: never)", func(f *policyFlags) *float64 { return &f.tailFactor }, func(u *api.PoliciesUpdate, v *float64) { u.TailFactor = v }},
	{"tail-wait", "fair_share: a job goes first on the tail only once it has waited this share of its estimate (0: at once)", func(f *policyFlags) *float64 { return &f.tailWait }, func(u *api.PoliciesUpdate, v *float64) { u.TailWait = v }},
}

func (f *policyFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.policy, "policy", "", "fair_share, priority, fcfs or sjf")
	fl.BoolVar(&f.backfill, "backfill", false, "let later jobs start when they cannot delay the head job's reservation")
	fl.BoolVar(&f.preemption, "preemption", false, "let higher-priority or under-share jobs preempt lower ones")
	fl.BoolVar(&f.spread, "spread", false, "place jobs on the emptiest nodes instead of the fullest that fit")
	fl.BoolVar(&f.oldestFirst, "oldest-first", false, "fair_share: the oldest starving job goes first whatever --starve-share holds")
	fl.IntVar(&f.idleThreshold, "idle-threshold", 0, "GPU utilization (percent) under which a job's GPUs count as idle")
	fl.StringVar(&f.idleAction, "idle-action", "", "what happens to a job flagged idle: notify, or preempt (for waiting work)")
	for _, d := range durationFlags {
		fl.StringVar(d.field(f), d.name, "", d.help)
	}
	for _, n := range numberFlags {
		fl.Float64Var(n.field(f), n.name, 0, n.help)
	}
	f.classIdle.register(cmd)
}

// update builds the PUT body from the flags that were given.
func (f *policyFlags) update(cmd *cobra.Command, args []string) (api.PoliciesUpdate, error) {
	var u api.PoliciesUpdate
	fl := cmd.Flags()
	if len(args) == 1 {
		if fl.Changed("policy") && f.policy != args[0] {
			return u, usagef("the policy is given twice: %q and --policy %q", args[0], f.policy)
		}
		f.policy = args[0]
	}
	changed := false
	if f.policy != "" {
		p := strings.ToLower(strings.TrimSpace(f.policy))
		u.Policy, changed = &p, true
	}
	for _, b := range []struct {
		name string
		v    bool
		dst  **bool
	}{{"backfill", f.backfill, &u.Backfill}, {"preemption", f.preemption, &u.Preemption}, {"spread", f.spread, &u.Spread}, {"oldest-first", f.oldestFirst, &u.OldestFirst}} {
		if fl.Changed(b.name) {
			v := b.v
			*b.dst, changed = &v, true
		}
	}
	if fl.Changed("idle-threshold") {
		v := f.idleThreshold
		u.IdleThreshold, changed = &v, true
	}
	if fl.Changed("idle-action") {
		v := f.idleAction
		u.IdleAction, changed = &v, true
	}
	for _, d := range durationFlags {
		v := *d.field(f)
		if !fl.Changed(d.name) {
			continue
		}
		n, err := normDuration("--"+d.name, v) // durflag.go: 3d, 1w too
		if err != nil {
			return u, err
		}
		d.set(&u, rawString(n))
		changed = true
	}
	for _, n := range numberFlags {
		if fl.Changed(n.name) {
			v := *n.field(f)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return u, usagef("--%s: %v is not a number", n.name, v)
			}
			n.set(&u, &v)
			changed = true
		}
	}
	if c, err := f.classIdle.update(cmd, &u); err != nil {
		return u, err
	} else if c {
		changed = true
	}
	if !changed {
		return u, usagef("nothing to set: name a policy, or give a switch or knob (see --help)")
	}
	return u, nil
}

func printPolicies(w io.Writer, p api.Policies) error {
	t := newTable(w)
	t.row("policy:", p.Policy)
	t.row("backfill:", onOff(p.Backfill))
	t.row("preemption:", onOff(p.Preemption))
	t.row("spread:", onOff(p.Spread))
	t.row("gang:", onOff(p.Gang)+" (multi-GPU jobs are placed all-or-nothing)")
	t.row("aging interval:", fmtDuration(p.AgingInterval.Duration())+" per priority level")
	t.row("usage half-life:", fmtDuration(p.HalfLife.Duration()))
	t.row("default estimate:", fmtDuration(p.DefaultEstimate.Duration()))
	t.row("min run time:", fmtDuration(p.MinRunTime.Duration())+" (protected from preemption)")
	t.row("preempt grace:", fmtDuration(p.PreemptGrace.Duration()))
	t.row("idle:", fmt.Sprintf("under %d%% for %s: %s", p.IdleThreshold, fmtDuration(p.IdleWindow.Duration()), p.IdleAction))
	starve := "never"
	if p.StarveAfter > 0 {
		starve = fmt.Sprintf("after %s, holding at most %g of the GPUs", fmtDuration(p.StarveAfter.Duration()), p.StarveShare)
		if p.StarveBacklog > 0 {
			starve = fmt.Sprintf("after %s and %g x the backlog, holding at most %g of the GPUs",
				fmtDuration(p.StarveAfter.Duration()), p.StarveBacklog, p.StarveShare)
		}
	}
	t.row("starving first:", starve+", oldest first "+onOff(p.OldestFirst))
	if p.StarveAfter > 0 && p.StarveLightShare > 0 && p.StarveLightDrain > 0 {
		light := fmt.Sprintf("after %s alone, holding at most %g of the GPUs, while the queue drains within %s",
			fmtDuration(p.StarveAfter.Duration()), p.StarveLightShare, fmtDuration(p.StarveLightDrain.Duration()))
		if p.StarveLightFloor > 0 && p.StarveLightFloor < p.StarveAfter {
			light += fmt.Sprintf("; sooner as the queue shortens, down to %s", fmtDuration(p.StarveLightFloor.Duration()))
		}
		t.row("light starving:", light)
	}
	reserve := "at once"
	if p.ReserveAfter > 0 {
		reserve = "after " + fmtDuration(p.ReserveAfter.Duration())
	}
	t.row("reservation:", reserve+" (fair_share with backfill)")
	tail := "off"
	if p.TailFactor > 0 {
		tail = fmt.Sprintf("estimate %g x the backlog, after waiting %g of it", p.TailFactor, p.TailWait)
	}
	t.row("long jobs first:", tail+" (fair_share's tail)")
	if len(p.Available) > 0 {
		t.row("available:", strings.Join(p.Available, ", "))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if err := printClassIdle(w, p); err != nil { // policyclass.go
		return err
	}
	if err := printLimits(w, "weights", p.Weights.Users, p.Weights.Projects, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }); err != nil {
		return err
	}
	return printLimits(w, "quotas (guaranteed GPUs)", p.Quotas.Users, p.Quotas.Projects, strconv.Itoa)
}

// printLimits writes a KIND NAME VALUE table of per-user and per-project
// values, or nothing when there are none.
func printLimits[V any](w io.Writer, title string, users, projects map[string]V, format func(V) string) error {
	if len(users)+len(projects) == 0 {
		return nil
	}
	fmt.Fprintf(w, "%s:\n", strings.ToUpper(title[:1])+title[1:])
	t := newTable(w, "  KIND", "NAME", "VALUE")
	for _, set := range []struct {
		kind string
		m    map[string]V
	}{{"user", users}, {"project", projects}} {
		names := make([]string, 0, len(set.m))
		for n := range set.m {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			t.row("  "+set.kind, n, format(set.m[n]))
		}
	}
	return t.flush()
}
