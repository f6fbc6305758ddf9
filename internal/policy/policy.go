// Package policy is the scheduling policy a cluster runs under, as the
// API shows and changes it (api.Policies): its defaults, its stored form,
// an update checked field by field (a bad field changes nothing), and the
// pure core's view of it (Sched).
package policy

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/reclaim"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/sched"
)

// Setting is the store key of the policies, as JSON.
const Setting = "policies"

// Idle actions: what happens to a job flagged idle.
const (
	IdleNotify  = "notify"  // it is flagged in the API, the CLI and the log
	IdlePreempt = "preempt" // flagged, and it may be preempted for waiting work
)

// DefaultPreemptGrace is how long a preempted job has between SIGTERM and
// SIGKILL unless it or the policy says otherwise.
const DefaultPreemptGrace = 30 * time.Second

// Defaults is what a new server starts with: fair share, backfill
// on, preemption off.
func Defaults() api.Policies {
	return api.Policies{
		Policy: sched.PolicyFairShare, Backfill: true, Gang: true,
		AgingInterval:    api.Seconds(sched.DefaultAgingInterval.Seconds()),
		HalfLife:         api.Seconds(sched.DefaultHalfLife.Seconds()),
		DefaultEstimate:  api.Seconds(sched.DefaultEstimate.Seconds()),
		MinRunTime:       api.Seconds(sched.DefaultMinRunTime.Seconds()),
		PreemptGrace:     api.Seconds(DefaultPreemptGrace.Seconds()),
		IdleThreshold:    5,
		IdleWindow:       api.Seconds((30 * time.Minute).Seconds()),
		IdleAction:       IdleNotify,
		StarveAfter:      api.Seconds(sched.DefaultStarveAfter.Seconds()),
		StarveShare:      sched.DefaultStarveShare,
		StarveBacklog:    sched.DefaultStarveBacklog,
		StarveLightShare: sched.DefaultStarveLightShare,
		StarveLightDrain: api.Seconds(sched.DefaultStarveLightDrain.Seconds()),
		StarveLightFloor: api.Seconds(sched.DefaultStarveLightFloor.Seconds()),
		ReserveAfter:     api.Seconds(sched.DefaultReserveAfter.Seconds()),
		TailFactor:       sched.DefaultTailFactor,
		TailWait:         sched.DefaultTailWait,
		Weights:          api.Weights{Users: map[string]float64{}, Projects: map[string]float64{}},
		Quotas:           api.Quotas{Users: map[string]int{}, Projects: map[string]int{}},
	}
}

// Load reads the stored policies over the defaults.
func Load(settings map[string]string) api.Policies {
	p := Defaults()
	if raw := settings[Setting]; raw != "" {
		json.Unmarshal([]byte(raw), &p)
	} else if name := settings["policy"]; sched.ValidPolicy(name) {
		p.Policy = name // written by an earlier version
	}
	if !sched.ValidPolicy(p.Policy) {
		p.Policy = sched.PolicyFairShare
	}
	if !(p.StarveShare > 0 && p.StarveShare <= 1) {
		p.StarveShare = sched.DefaultStarveShare
	}
	if p.IdleAction == "" {
		p.IdleAction, p.IdleThreshold, p.IdleWindow = IdleNotify, 5, api.Seconds((30 * time.Minute).Seconds())
	}
	p.Gang = true
	for _, m := range []*map[string]float64{&p.Weights.Users, &p.Weights.Projects} {
		if *m == nil {
			*m = map[string]float64{}
		}
	}
	for _, m := range []*map[string]int{&p.Quotas.Users, &p.Quotas.Projects} {
		if *m == nil {
			*m = map[string]int{}
		}
	}
	return p
}

// Sched converts the API's policies to the core's. The API's 0 (never,
// or at once) is the core's negative: the core's 0 is its default.
func Sched(p api.Policies) sched.Policy {
	return sched.Policy{
		Name: p.Policy, Backfill: p.Backfill, Preemption: p.Preemption, Spread: p.Spread,
		AgingInterval: p.AgingInterval.Duration(), HalfLife: p.HalfLife.Duration(),
		DefaultEstimate: p.DefaultEstimate.Duration(), MinRunTime: p.MinRunTime.Duration(),
		StarveAfter: orNegative(p.StarveAfter.Duration()), StarveShare: p.StarveShare, OldestFirst: p.OldestFirst,
		StarveBacklog:    orNegative(p.StarveBacklog),
		StarveLightShare: orNegative(p.StarveLightShare), StarveLightDrain: orNegative(p.StarveLightDrain.Duration()),
		StarveLightFloor: orNegative(p.StarveLightFloor.Duration()),
		ReserveAfter:     orNegative(p.ReserveAfter.Duration()),
		TailFactor:       orNegative(p.TailFactor), TailWait: orNegative(p.TailWait),
		UserWeights: p.Weights.Users, ProjectWeights: p.Weights.Projects,
		UserQuotas: p.Quotas.Users, ProjectQuotas: p.Quotas.Projects,
		PreemptIdle: p.IdleAction == IdlePreempt,
	}
}

// orNegative is v, or -1 for 0: the core's "never" (or "at once").
func orNegative[T time.Duration | float64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// knob bounds: below or above these a value is a typo.
var knobs = []struct {
	field    string
	min, max time.Duration
	get      func(*api.PoliciesUpdate) api.RawValue
	set      func(*api.Policies, api.Seconds)
}{
	{"aging_interval", time.Minute, 30 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.AgingInterval }, func(p *api.Policies, v api.Seconds) { p.AgingInterval = v }},
	{"half_life", time.Hour, 365 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.HalfLife }, func(p *api.Policies, v api.Seconds) { p.HalfLife = v }},
	{"default_estimate", time.Minute, 30 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.DefaultEstimate }, func(p *api.Policies, v api.Seconds) { p.DefaultEstimate = v }},
	{"min_run_time", 0, 7 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.MinRunTime }, func(p *api.Policies, v api.Seconds) { p.MinRunTime = v }},
	{"preempt_grace", 0, 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.PreemptGrace }, func(p *api.Policies, v api.Seconds) { p.PreemptGrace = v }},
	{"idle_window", time.Second, 7 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.IdleWindow }, func(p *api.Policies, v api.Seconds) { p.IdleWindow = v }},
	{"starve_after", 0, 365 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.StarveAfter }, func(p *api.Policies, v api.Seconds) { p.StarveAfter = v }},
	{"starve_light_drain", 0, 365 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.StarveLightDrain }, func(p *api.Policies, v api.Seconds) { p.StarveLightDrain = v }},
	{"starve_light_floor", 0, 365 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.StarveLightFloor }, func(p *api.Policies, v api.Seconds) { p.StarveLightFloor = v }},
	{"reserve_after", 0, 30 * 24 * time.Hour, func(u *api.PoliciesUpdate) api.RawValue { return u.ReserveAfter }, func(p *api.Policies, v api.Seconds) { p.ReserveAfter = v }},
}

// ratios are the knobs that are plain numbers, with their bounds: below
// or above these a value is a typo.
var ratios = []struct {
	field    string
	min, max float64
	open     bool // min itself is refused
	get      func(*api.PoliciesUpdate) *float64
	set      func(*api.Policies) *float64
}{
	{"starve_share", 0, 1, true, func(u *api.PoliciesUpdate) *float64 { return u.StarveShare }, func(p *api.Policies) *float64 { return &p.StarveShare }},
	{"starve_backlog", 0, 1000, false, func(u *api.PoliciesUpdate) *float64 { return u.StarveBacklog }, func(p *api.Policies) *float64 { return &p.StarveBacklog }},
	{"starve_light_share", 0, 1, false, func(u *api.PoliciesUpdate) *float64 { return u.StarveLightShare }, func(p *api.Policies) *float64 { return &p.StarveLightShare }},
	{"tail_factor", 0, 1000, false, func(u *api.PoliciesUpdate) *float64 { return u.TailFactor }, func(p *api.Policies) *float64 { return &p.TailFactor }},
	{"tail_wait", 0, 100, false, func(u *api.PoliciesUpdate) *float64 { return u.TailWait }, func(p *api.Policies) *float64 { return &p.TailWait }},
}

// Apply returns p changed by u, or an error naming the first bad field.
func Apply(p api.Policies, u api.PoliciesUpdate) (api.Policies, error) {
	p.Weights.Users, p.Weights.Projects = maps.Clone(p.Weights.Users), maps.Clone(p.Weights.Projects)
	p.Quotas.Users, p.Quotas.Projects = maps.Clone(p.Quotas.Users), maps.Clone(p.Quotas.Projects)
	if u.Policy != nil {
		if !sched.ValidPolicy(*u.Policy) {
			return p, api.Invalid("policy", "%q is not a policy; choose one of %v", *u.Policy, sched.Policies())
		}
		p.Policy = *u.Policy
	}
	if u.Gang != nil && !*u.Gang {
		return p, api.Invalid("gang", "gang placement is always on: a multi-GPU job starts on all its GPUs at once or not at all")
	}
	for _, b := range []struct {
		v   *bool
		dst *bool
	}{{u.Backfill, &p.Backfill}, {u.Preemption, &p.Preemption}, {u.Spread, &p.Spread}, {u.OldestFirst, &p.OldestFirst}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	for _, k := range knobs {
		raw := k.get(&u)
		if api.IsNull(raw) {
			continue
		}
		v, err := api.ParseSecondsJSON(raw)
		if err != nil {
			return p, api.Invalid(k.field, "%s", err.Error())
		}
		if d := v.Duration(); d < k.min || d > k.max {
			return p, api.Invalid(k.field, "must be between %s and %s", k.min, k.max)
		}
		k.set(&p, v)
	}
	for _, r := range ratios {
		v := r.get(&u)
		if v == nil {
			continue
		}
		if *v != *v || *v < r.min || *v > r.max || r.open && *v == r.min {
			low := "at least"
			if r.open {
				low = "above"
			}
			return p, api.Invalid(r.field, "must be %s %g and at most %g", low, r.min, r.max)
		}
		*r.set(&p) = *v
	}
	if u.IdleThreshold != nil {
		if *u.IdleThreshold < 0 || *u.IdleThreshold > 100 {
			return p, api.Invalid("idle_threshold", "must be a percentage between 0 and 100")
		}
		p.IdleThreshold = *u.IdleThreshold
	}
	if u.IdleAction != nil {
		if *u.IdleAction != IdleNotify && *u.IdleAction != IdlePreempt {
			return p, api.Invalid("idle_action", "%q is not notify or preempt", *u.IdleAction)
		}
		p.IdleAction = *u.IdleAction
	}
	if err := reclaim.Apply(&p, u.Classes); err != nil {
		return p, err
	}
	if w := u.Weights; w != nil {
		for _, set := range []struct {
			field string
			in    map[string]*float64
			out   map[string]float64
		}{{"weights.users", w.Users, p.Weights.Users}, {"weights.projects", w.Projects, p.Weights.Projects}} {
			for name, v := range set.in {
				if !jobspec.UserName.MatchString(name) || len(name) > jobspec.MaxUserLen {
					return p, api.Invalid(set.field, "%q is not a valid name", cut(name, 40))
				}
				switch {
				case v == nil:
					delete(set.out, name)
				case *v <= 0 || *v > 1e6 || *v != *v:
					return p, api.Invalid(set.field, "the weight of %s must be above 0 and at most 1e6", name)
				default:
					set.out[name] = *v
				}
			}
		}
	}
	if q := u.Quotas; q != nil {
		for _, set := range []struct {
			field string
			in    map[string]*int
			out   map[string]int
		}{{"quotas.users", q.Users, p.Quotas.Users}, {"quotas.projects", q.Projects, p.Quotas.Projects}} {
			for name, v := range set.in {
				if !jobspec.UserName.MatchString(name) || len(name) > jobspec.MaxUserLen {
					return p, api.Invalid(set.field, "%q is not a valid name", cut(name, 40))
				}
				switch {
				case v == nil:
					delete(set.out, name)
				case *v < 0 || *v > 1e6:
					return p, api.Invalid(set.field, "the quota of %s must be between 0 and 1000000 GPUs", name)
				default:
					set.out[name] = *v
				}
			}
		}
	}
	return p, nil
}

// cut shortens s to n bytes for an error message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
