package policy

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// An update changes what it names and nothing else; a bad field is an
// error naming it and leaves the policies as they were.
func TestApply(t *testing.T) {
	str := func(s string) *string { return &s }
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	b := func(v bool) *bool { return &v }
	raw := func(s string) api.RawValue { return api.RawValue(`"` + s + `"`) }
	for name, c := range map[string]struct {
		u     api.PoliciesUpdate
		field string // "" accepted
		check func(p api.Policies) bool
	}{
		"policy":              {u: api.PoliciesUpdate{Policy: str(sched.PolicyFCFS)}, check: func(p api.Policies) bool { return p.Policy == sched.PolicyFCFS }},
		"no such policy":      {u: api.PoliciesUpdate{Policy: str("lottery")}, field: "policy"},
		"gang off":            {u: api.PoliciesUpdate{Gang: b(false)}, field: "gang"},
		"preemption":          {u: api.PoliciesUpdate{Preemption: b(true)}, check: func(p api.Policies) bool { return p.Preemption && p.Backfill }},
		"half life":           {u: api.PoliciesUpdate{HalfLife: raw("48h")}, check: func(p api.Policies) bool { return p.HalfLife.Duration().Hours() == 48 }},
		"half life short":     {u: api.PoliciesUpdate{HalfLife: raw("1m")}, field: "half_life"},
		"grace no time":       {u: api.PoliciesUpdate{PreemptGrace: raw("soon")}, field: "preempt_grace"},
		"idle action":         {u: api.PoliciesUpdate{IdleAction: str("kill")}, field: "idle_action"},
		"idle threshold":      {u: api.PoliciesUpdate{IdleThreshold: n(101)}, field: "idle_threshold"},
		"weight":              {u: api.PoliciesUpdate{Weights: &api.WeightsUpdate{Users: map[string]*float64{"ana": f(2)}}}, check: func(p api.Policies) bool { return p.Weights.Users["ana"] == 2 }},
		"weight of zero":      {u: api.PoliciesUpdate{Weights: &api.WeightsUpdate{Users: map[string]*float64{"ana": f(0)}}}, field: "weights.users"},
		"weight bad name":     {u: api.PoliciesUpdate{Weights: &api.WeightsUpdate{Projects: map[string]*float64{"a b": f(1)}}}, field: "weights.projects"},
		"quota":               {u: api.PoliciesUpdate{Quotas: &api.QuotasUpdate{Projects: map[string]*int{"vision": n(8)}}}, check: func(p api.Policies) bool { return p.Quotas.Projects["vision"] == 8 }},
		"negative quota":      {u: api.PoliciesUpdate{Quotas: &api.QuotasUpdate{Users: map[string]*int{"bo": n(-1)}}}, field: "quotas.users"},
		"starve after":        {u: api.PoliciesUpdate{StarveAfter: raw("96h")}, check: func(p api.Policies) bool { return p.StarveAfter.Duration().Hours() == 96 }},
		"starve never":        {u: api.PoliciesUpdate{StarveAfter: api.RawValue(`0`)}, check: func(p api.Policies) bool { return p.StarveAfter == 0 }},
		"starve after a year": {u: api.PoliciesUpdate{StarveAfter: raw("9000h")}, field: "starve_after"},
		"starve after word":   {u: api.PoliciesUpdate{StarveAfter: raw("later")}, field: "starve_after"},
		"starve share":        {u: api.PoliciesUpdate{StarveShare: f(0.2)}, check: func(p api.Policies) bool { return p.StarveShare == 0.2 }},
		"starve share all":    {u: api.PoliciesUpdate{StarveShare: f(1)}, check: func(p api.Policies) bool { return p.StarveShare == 1 }},
		"starve share zero":   {u: api.PoliciesUpdate{StarveShare: f(0)}, field: "starve_share"},
		"starve share over":   {u: api.PoliciesUpdate{StarveShare: f(1.5)}, field: "starve_share"},
		"oldest first":        {u: api.PoliciesUpdate{OldestFirst: b(true)}, check: func(p api.Policies) bool { return p.OldestFirst && p.Backfill }},
		"reserve at once":     {u: api.PoliciesUpdate{ReserveAfter: raw("0s")}, check: func(p api.Policies) bool { return p.ReserveAfter == 0 }},
		"reserve negative":    {u: api.PoliciesUpdate{ReserveAfter: api.RawValue(`-60`)}, field: "reserve_after"},
		"reserve after 2 mo":  {u: api.PoliciesUpdate{ReserveAfter: raw("1500h")}, field: "reserve_after"},
		"light share":         {u: api.PoliciesUpdate{StarveLightShare: f(0.2)}, check: func(p api.Policies) bool { return p.StarveLightShare == 0.2 }},
		"light never":         {u: api.PoliciesUpdate{StarveLightShare: f(0)}, check: func(p api.Policies) bool { return p.StarveLightShare == 0 }},
		"light share over":    {u: api.PoliciesUpdate{StarveLightShare: f(1.5)}, field: "starve_light_share"},
		"light share neg":     {u: api.PoliciesUpdate{StarveLightShare: f(-0.1)}, field: "starve_light_share"},
		"light drain":         {u: api.PoliciesUpdate{StarveLightDrain: raw("96h")}, check: func(p api.Policies) bool { return p.StarveLightDrain.Duration().Hours() == 96 }},
		"light drain neg":     {u: api.PoliciesUpdate{StarveLightDrain: api.RawValue(`-60`)}, field: "starve_light_drain"},
		"light drain 2 years": {u: api.PoliciesUpdate{StarveLightDrain: raw("20000h")}, field: "starve_light_drain"},
		"light floor":         {u: api.PoliciesUpdate{StarveLightFloor: raw("6h")}, check: func(p api.Policies) bool { return p.StarveLightFloor.Duration().Hours() == 6 }},
		"light floor none":    {u: api.PoliciesUpdate{StarveLightFloor: raw("0s")}, check: func(p api.Policies) bool { return p.StarveLightFloor == 0 }},
		"light floor neg":     {u: api.PoliciesUpdate{StarveLightFloor: api.RawValue(`-60`)}, field: "starve_light_floor"},
		"light floor bad":     {u: api.PoliciesUpdate{StarveLightFloor: api.RawValue(`"soon"`)}, field: "starve_light_floor"},
		"tail factor":         {u: api.PoliciesUpdate{TailFactor: f(2)}, check: func(p api.Policies) bool { return p.TailFactor == 2 }},
		"tail never":          {u: api.PoliciesUpdate{TailFactor: f(0)}, check: func(p api.Policies) bool { return p.TailFactor == 0 }},
		"tail factor neg":     {u: api.PoliciesUpdate{TailFactor: f(-1)}, field: "tail_factor"},
		"tail factor NaN":     {u: api.PoliciesUpdate{TailFactor: f(math.NaN())}, field: "tail_factor"},
		"tail wait":           {u: api.PoliciesUpdate{TailWait: f(0.02)}, check: func(p api.Policies) bool { return p.TailWait == 0.02 }},
		"tail wait neg":       {u: api.PoliciesUpdate{TailWait: f(-0.1)}, field: "tail_wait"},
		"tail wait huge":      {u: api.PoliciesUpdate{TailWait: f(1e9)}, field: "tail_wait"},
		"bad knob, good knob": {u: api.PoliciesUpdate{TailFactor: f(2), TailWait: f(-1)}, field: "tail_wait"},
		"interactive idle":    {u: api.PoliciesUpdate{Classes: map[string]api.ClassIdleUpdate{"batch": {}}}, field: "classes"},
	} {
		t.Run(name, func(t *testing.T) {
			before := Defaults()
			before.Weights.Users["ana"] = 1
			p, err := Apply(before, c.u)
			var ae *api.Error
			switch {
			case c.field == "" && (err != nil || !c.check(p)):
				t.Fatalf("%v, %+v", err, p)
			case c.field != "" && (!errors.As(err, &ae) || ae.Field != c.field):
				t.Fatalf("err %v; want one naming %s", err, c.field)
			}
			if before.Weights.Users["ana"] != 1 || len(before.Quotas.Projects) != 0 {
				t.Fatal("an update changed the policies it was given")
			}
		})
	}
}

// Stored policies are read over the defaults; a policy written by an
// earlier version (the setting "policy") is kept, an unknown one is fair
// share; gang placement is always on; the core sees the same values.
func TestLoadAndSched(t *testing.T) {
	if p := Load(map[string]string{"policy": sched.PolicySJF}); p.Policy != sched.PolicySJF || !p.Gang || p.Weights.Users == nil {
		t.Fatalf("legacy setting: %+v", p)
	}
	if p := Load(map[string]string{Setting: `{"policy":"lottery","gang":false}`}); p.Policy != sched.PolicyFairShare || !p.Gang {
		t.Fatalf("unknown policy: %+v", p)
	}
	p := Defaults()
	p.IdleAction = IdlePreempt
	p.Quotas.Users["ana"] = 4
	s := Sched(p)
	if s.Name != p.Policy || !s.Backfill || !s.PreemptIdle || s.UserQuotas["ana"] != 4 || s.HalfLife != p.HalfLife.Duration() {
		t.Fatalf("core's view %+v", s)
	}
}

// The knobs' defaults are the core's, policies stored before the knobs
// existed get them, and the API's 0 is the core's never (or at once).
func TestStarveAndTailKnobs(t *testing.T) {
	old := Load(map[string]string{Setting: `{"policy":"fair_share","backfill":true}`})
	for _, p := range []api.Policies{Defaults(), old} {
		s := Sched(p)
		if s.StarveAfter != sched.DefaultStarveAfter || s.StarveShare != sched.DefaultStarveShare || s.OldestFirst ||
			s.ReserveAfter != sched.DefaultReserveAfter || s.TailFactor != sched.DefaultTailFactor || s.TailWait != sched.DefaultTailWait ||
			s.StarveLightShare != sched.DefaultStarveLightShare || s.StarveLightDrain != sched.DefaultStarveLightDrain ||
			s.StarveLightFloor != sched.DefaultStarveLightFloor {
			t.Fatalf("defaults: %+v", s)
		}
	}
	if p := Load(map[string]string{Setting: `{"starve_share":0}`}); p.StarveShare != sched.DefaultStarveShare {
		t.Fatalf("a stored starve_share of 0 read as %v", p.StarveShare)
	}
	for _, c := range []struct {
		name string
		u    api.PoliciesUpdate
		want func(sched.Policy) bool
	}{
		{"starve never", api.PoliciesUpdate{StarveAfter: api.RawValue(`0`)}, func(s sched.Policy) bool { return s.StarveAfter < 0 }},
		{"reserve at once", api.PoliciesUpdate{ReserveAfter: api.RawValue(`0`)}, func(s sched.Policy) bool { return s.ReserveAfter < 0 }},
		{"no tail", api.PoliciesUpdate{TailFactor: new(float64)}, func(s sched.Policy) bool { return s.TailFactor < 0 }},
		{"tail at once", api.PoliciesUpdate{TailWait: new(float64)}, func(s sched.Policy) bool { return s.TailWait < 0 }},
		{"no light starving", api.PoliciesUpdate{StarveLightShare: new(float64)}, func(s sched.Policy) bool { return s.StarveLightShare < 0 }},
		{"no light drain", api.PoliciesUpdate{StarveLightDrain: api.RawValue(`0`)}, func(s sched.Policy) bool { return s.StarveLightDrain < 0 }},
		{"no light floor", api.PoliciesUpdate{StarveLightFloor: api.RawValue(`0`)}, func(s sched.Policy) bool { return s.StarveLightFloor < 0 }},
		{"values", api.PoliciesUpdate{StarveAfter: api.RawValue(`"96h"`), ReserveAfter: api.RawValue(`"1h"`), OldestFirst: ptr(true), TailFactor: ptr(2.0), TailWait: ptr(0.02), StarveShare: ptr(0.2)},
			func(s sched.Policy) bool {
				return s.StarveAfter == 96*time.Hour && s.ReserveAfter == time.Hour && s.OldestFirst && s.TailFactor == 2 && s.TailWait == 0.02 && s.StarveShare == 0.2
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Apply(Defaults(), c.u)
			if err != nil {
				t.Fatal(err)
			}
			if s := Sched(p); !c.want(s) {
				t.Fatalf("core's view %+v", s)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
