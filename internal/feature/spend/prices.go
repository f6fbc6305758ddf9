package spend

import (
	"encoding/json"
	"maps"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/usage"
)

// settingPrices is the store key of the GPU prices (JSON: model ->
// dollars per GPU-hour).
const settingPrices = "prices"

// readPrices reads the prices from the stored settings. From Load.
func (b *Books) readPrices(settings map[string]string) {
	raw := settings[settingPrices]
	if raw == "" {
		return
	}
	p := usage.Prices{}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		b.log.Warn("stored GPU prices unreadable; no prices", "err", err)
		return
	}
	b.prices = p
}

// Prices returns a copy of the GPU prices (dollars per GPU-hour by
// model). Read lock held.
func (b *Books) Prices() usage.Prices { return maps.Clone(b.prices) }

// CheckPrice checks a price to set: a bad model or price is an
// *api.Error naming the field (model, dollars_per_hour).
func CheckPrice(model string, dollarsPerHour float64) error {
	if err := usage.ValidPrice(model, dollarsPerHour); err != nil {
		field := "dollars_per_hour"
		if usage.ValidPrice(model, 0) != nil {
			field = "model"
		}
		return api.Invalid(field, "%s", err.Error())
	}
	return nil
}

// SetPrice sets a GPU model's price (checked by CheckPrice), in tx, and
// returns a copy of the prices. Costs already counted in the metrics keep
// their price; reports price at today's.
func (b *Books) SetPrice(tx feature.Tx, model string, dollarsPerHour float64) (usage.Prices, error) {
	return b.changePrices(tx, func(p usage.Prices) error { p[model] = dollarsPerHour; return nil })
}

// UnsetPrice removes a GPU model's price, in tx; 404 when it has none.
func (b *Books) UnsetPrice(tx feature.Tx, model string) (usage.Prices, error) {
	return b.changePrices(tx, func(p usage.Prices) error {
		if _, ok := p[model]; !ok {
			return &api.Error{Status: 404, Code: "not_found", Message: "no price is set for GPU model " + model}
		}
		delete(p, model)
		return nil
	})
}

func (b *Books) changePrices(tx feature.Tx, change func(usage.Prices) error) (usage.Prices, error) {
	p := maps.Clone(b.prices)
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
	b.prices = p
	setting(tx, settingPrices, string(raw))
	return maps.Clone(p), nil
}

// setting adds a setting to tx's batch.
func setting(tx feature.Tx, key, value string) {
	batch := tx.Batch()
	if batch.Settings == nil {
		batch.Settings = map[string]string{}
	}
	batch.Settings[key] = value
}
