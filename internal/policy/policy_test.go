package policy

import (
	"errors"
	"testing"

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
		"policy":           {u: api.PoliciesUpdate{Policy: str(sched.PolicyFCFS)}, check: func(p api.Policies) bool { return p.Policy == sched.PolicyFCFS }},
		"no such policy":   {u: api.PoliciesUpdate{Policy: str("lottery")}, field: "policy"},
		"gang off":         {u: api.PoliciesUpdate{Gang: b(false)}, field: "gang"},
		"preemption":       {u: api.PoliciesUpdate{Preemption: b(true)}, check: func(p api.Policies) bool { return p.Preemption && p.Backfill }},
		"half life":        {u: api.PoliciesUpdate{HalfLife: raw("48h")}, check: func(p api.Policies) bool { return p.HalfLife.Duration().Hours() == 48 }},
		"half life short":  {u: api.PoliciesUpdate{HalfLife: raw("1m")}, field: "half_life"},
		"grace no time":    {u: api.PoliciesUpdate{PreemptGrace: raw("soon")}, field: "preempt_grace"},
		"idle action":      {u: api.PoliciesUpdate{IdleAction: str("kill")}, field: "idle_action"},
		"idle threshold":   {u: api.PoliciesUpdate{IdleThreshold: n(101)}, field: "idle_threshold"},
		"weight":           {u: api.PoliciesUpdate{Weights: &api.WeightsUpdate{Users: map[string]*float64{"ana": f(2)}}}, check: func(p api.Policies) bool { return p.Weights.Users["ana"] == 2 }},
		"weight of zero":   {u: api.PoliciesUpdate{Weights: &api.WeightsUpdate{Users: map[string]*float64{"ana": f(0)}}}, field: "weights.users"},
		"weight bad name":  {u: api.PoliciesUpdate{Weights: &api.WeightsUpdate{Projects: map[string]*float64{"a b": f(1)}}}, field: "weights.projects"},
		"quota":            {u: api.PoliciesUpdate{Quotas: &api.QuotasUpdate{Projects: map[string]*int{"vision": n(8)}}}, check: func(p api.Policies) bool { return p.Quotas.Projects["vision"] == 8 }},
		"negative quota":   {u: api.PoliciesUpdate{Quotas: &api.QuotasUpdate{Users: map[string]*int{"bo": n(-1)}}}, field: "quotas.users"},
		"interactive idle": {u: api.PoliciesUpdate{Classes: map[string]api.ClassIdleUpdate{"batch": {}}}, field: "classes"},
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
