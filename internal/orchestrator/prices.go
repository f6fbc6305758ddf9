package orchestrator

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// settingPrices is the store key of the GPU prices (JSON: model ->
// dollars per GPU-hour).
const settingPrices = "prices"

// readPrices reads the prices from the stored settings. From
// readUsageState.
func (o *Orchestrator) readPrices(settings map[string]string) {
	raw := settings[settingPrices]
	if raw == "" {
		return
	}
	p := usage.Prices{}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		o.log.Warn("stored GPU prices unreadable; no prices", "err", err)
		return
	}
	o.use.prices = p
}

// Prices returns a copy of the GPU prices (dollars per GPU-hour by model).
func (o *Orchestrator) Prices() usage.Prices {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return maps.Clone(o.use.prices)
}

// SetPrice sets a GPU model's price, durably. A bad model or price is an
// *api.Error naming the field (model, dollars_per_hour). Costs already
// counted in the metrics keep their price; reports price at today's.
func (o *Orchestrator) SetPrice(ctx context.Context, model string, dollarsPerHour float64) (usage.Prices, error) {
	if err := usage.ValidPrice(model, dollarsPerHour); err != nil {
		field := "dollars_per_hour"
		if usage.ValidPrice(model, 0) != nil {
			field = "model"
		}
		return nil, api.Invalid(field, "%s", err.Error())
	}
	return o.changePrices(ctx, func(p usage.Prices) error { p[model] = dollarsPerHour; return nil })
}

// UnsetPrice removes a GPU model's price; 404 when it has none.
func (o *Orchestrator) UnsetPrice(ctx context.Context, model string) (usage.Prices, error) {
	return o.changePrices(ctx, func(p usage.Prices) error {
		if _, ok := p[model]; !ok {
			return &api.Error{Status: 404, Code: "not_found", Message: "no price is set for GPU model " + model}
		}
		delete(p, model)
		return nil
	})
}

func (o *Orchestrator) changePrices(ctx context.Context, change func(usage.Prices) error) (usage.Prices, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		p := maps.Clone(o.use.prices)
		if p == nil {
			p = usage.Prices{}
		}
		if err := change(p); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		o.use.prices = p
		if tx.batch.Settings == nil {
			tx.batch.Settings = map[string]string{}
		}
		tx.batch.Settings[settingPrices] = string(raw)
		return maps.Clone(p), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(usage.Prices), nil
}
