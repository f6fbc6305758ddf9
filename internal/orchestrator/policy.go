package orchestrator

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/policy"
	"github.com/corral-sched/corral/internal/sched"
)

// The policies themselves (defaults, stored form, updates) are package
// policy's; the orchestrator holds the live one (o.policy).

// Idle actions and the preemption grace, as package policy names them.
const (
	IdleNotify          = policy.IdleNotify
	IdlePreempt         = policy.IdlePreempt
	DefaultPreemptGrace = policy.DefaultPreemptGrace
)

// Policies is GET /orchestrator/policies.
func (o *Orchestrator) Policies() api.Policies {
	o.mu.RLock()
	defer o.mu.RUnlock()
	p := o.policy
	p.Weights.Users, p.Weights.Projects = maps.Clone(p.Weights.Users), maps.Clone(p.Weights.Projects)
	p.Quotas.Users, p.Quotas.Projects = maps.Clone(p.Quotas.Users), maps.Clone(p.Quotas.Projects)
	p.Available = sched.Policies()
	return p
}

// SetPolicies changes the policies; they take effect at the next cycle and
// are persisted. A bad field changes nothing.
func (o *Orchestrator) SetPolicies(ctx context.Context, u api.PoliciesUpdate) (api.Policies, error) {
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		p, err := policy.Apply(o.policy, u)
		if err != nil {
			return nil, err
		}
		if err := o.reclaim.Check(p); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		if p.HalfLife != o.policy.HalfLife {
			o.rebuildLedger(p.HalfLife.Duration())
		}
		o.policy = p
		if tx.batch.Settings == nil {
			tx.batch.Settings = map[string]string{}
		}
		tx.batch.Settings[policy.Setting] = string(raw) // a batch's other settings stay
		o.dirty = true
		o.log.Info("policies changed", "policy", p.Policy, "backfill", p.Backfill, "preemption", p.Preemption)
		return nil, nil
	})
	if err != nil {
		return api.Policies{}, err
	}
	return o.Policies(), nil
}
