package advise

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// DefaultPrices is the price table shipped with Corral (prices.json).
//
//go:embed prices.json
var DefaultPrices []byte

// Prices is a price table: cloud instances and the cluster's own cost.
type Prices struct {
	Comment  string `json:"comment,omitempty"`
	Currency string `json:"currency"`
	// OnPremises is the amortised cost of one of the cluster's GPU-hours,
	// by GPU model.
	OnPremises map[string]float64 `json:"on_premises"`
	Instances  []Instance         `json:"instances"`
}

// Instance is one cloud instance type; prices are per instance-hour.
type Instance struct {
	Name        string  `json:"name"`
	Provider    string  `json:"provider"`
	GPU         string  `json:"gpu"` // the model: H100, A100, A10G, T4, ...
	GPUs        int     `json:"gpus"`
	GPUMemoryGB float64 `json:"gpu_memory_gb"`
	OnDemand    float64 `json:"on_demand"`
	Spot        float64 `json:"spot,omitempty"` // 0: none offered
}

// ParsePrices reads a price table, naming what is wrong with it.
func ParsePrices(data []byte) (Prices, error) {
	var p Prices
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Prices{}, fmt.Errorf("price table: %w", err)
	}
	if len(p.Instances) == 0 {
		return Prices{}, fmt.Errorf("price table: instances: none listed")
	}
	for i, in := range p.Instances {
		switch {
		case in.Name == "":
			return Prices{}, fmt.Errorf("price table: instances[%d].name: empty", i)
		case in.GPUs < 1:
			return Prices{}, fmt.Errorf("price table: instances[%d] (%s).gpus: want at least 1", i, in.Name)
		case in.GPUMemoryGB <= 0:
			return Prices{}, fmt.Errorf("price table: instances[%d] (%s).gpu_memory_gb: want more than 0", i, in.Name)
		case !(in.OnDemand > 0) || math.IsInf(in.OnDemand, 0) || in.Spot < 0 || math.IsNaN(in.Spot) || math.IsInf(in.Spot, 0):
			return Prices{}, fmt.Errorf("price table: instances[%d] (%s): on_demand must be above 0 and spot not negative", i, in.Name)
		}
	}
	for m, v := range p.OnPremises {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return Prices{}, fmt.Errorf("price table: on_premises.%s: must not be negative", m)
		}
	}
	if p.Currency == "" {
		p.Currency = "USD"
	}
	return p, nil
}

// HoursPerMonth is the month recommendations are priced over (365 x 24 / 12).
const HoursPerMonth = 730

// Option is one way to run the load, priced per month.
type Option struct {
	Name    string  `json:"name"`    // "cluster" or an instance type and market ("g5.xlarge spot")
	Monthly float64 `json:"monthly"` // cost per month at the profile's rate of use
	// Covers is the share of the profile's GPU-hours this option can run
	// (jobs whose GPU count per node and GPU memory fit the instance).
	Covers    float64 `json:"covers"`
	Rationale string  `json:"rationale"`
}

// Recommend prices the profile's load, scaled to a month, on the cluster
// (its GPUs all month at the on-premises rates) and on each instance type
// and market that covers some of it (paying only for the instance-hours
// the load needs, packed perfectly: a lower bound), cheapest first among
// the options covering everything, then the partial ones.
func Recommend(p api.LoadProfile, prices Prices) []Option {
	period := p.Until.Sub(p.Since).Hours()
	if period <= 0 {
		return nil
	}
	scale := HoursPerMonth / period
	monthlyGPUHours := p.GPUHours * scale
	var out []Option
	if c := clusterOption(p, prices, monthlyGPUHours); c != nil {
		out = append(out, *c)
	}
	for _, in := range prices.Instances {
		covered, unfit := coverage(p, in)
		if covered == 0 {
			continue
		}
		share := covered / p.GPUHours
		hours := covered * scale / float64(in.GPUs) // instance-hours per month
		markets := []struct {
			name  string
			price float64
			note  string
		}{{"on-demand", in.OnDemand, ""}, {"spot", in.Spot, "; spot capacity can be reclaimed at two minutes' notice: for jobs that checkpoint on Corral's preemption notice"}}
		for _, m := range markets {
			if m.price <= 0 {
				continue
			}
			out = append(out, Option{
				Name:    fmt.Sprintf("%s %s (%s, %d x %s %gGB)", in.Name, m.name, in.Provider, in.GPUs, in.GPU, in.GPUMemoryGB),
				Monthly: hours * m.price,
				Covers:  share,
				Rationale: fmt.Sprintf("%.0f%% of GPU-hours fit (%s); %.0f instance-hours a month at $%.2f, paid only while jobs run%s",
					100*share, unfit, hours, m.price, m.note),
			})
		}
	}
	slices.SortStableFunc(out, func(a, b Option) int {
		fa, fb := a.Covers >= 0.999, b.Covers >= 0.999
		switch {
		case fa != fb && fa:
			return -1
		case fa != fb:
			return 1
		}
		if a.Monthly != b.Monthly {
			if a.Monthly < b.Monthly {
				return -1
			}
			return 1
		}
		return 0
	})
	return out
}

// clusterOption prices the cluster's GPUs all month; nil without GPUs.
func clusterOption(p api.LoadProfile, prices Prices, monthlyGPUHours float64) *Option {
	gpus, cost := 0, 0.0
	var unpriced []string
	models := make([]string, 0, len(p.ClusterGPUs))
	for m := range p.ClusterGPUs {
		models = append(models, m)
	}
	slices.Sort(models)
	for _, m := range models {
		n := p.ClusterGPUs[m]
		gpus += n
		rate, ok := onPremRate(prices, m)
		if !ok {
			unpriced = append(unpriced, m)
			continue
		}
		cost += float64(n) * HoursPerMonth * rate
	}
	if gpus == 0 {
		return nil
	}
	util := monthlyGPUHours / float64(gpus*HoursPerMonth)
	why := fmt.Sprintf("%d GPUs all month; the load used %.0f%% of them (typical %g GPUs busy, peak %d)", gpus, 100*util, p.TypicalGPUs, p.PeakGPUs)
	if p.PeakGPUs > gpus {
		why += "; jobs queued at the peak"
	}
	if util < 0.5 {
		why += "; under half used: fewer GPUs, or renting out the rest, would pay"
	}
	if len(unpriced) > 0 {
		why += "; no on-premises price for " + strings.Join(unpriced, ", ") + " (left out of the cost)"
	}
	return &Option{Name: "cluster (on premises)", Monthly: cost, Covers: 1, Rationale: why}
}

// onPremRate finds the on-premises rate of a GPU model, whose name as
// NVML reports it ("NVIDIA H100 80GB HBM3") contains the table's key.
func onPremRate(prices Prices, model string) (float64, bool) {
	if r, ok := prices.OnPremises[model]; ok {
		return r, true
	}
	best, rate := "", 0.0
	for k, r := range prices.OnPremises {
		if strings.Contains(strings.ToUpper(model), strings.ToUpper(k)) && len(k) > len(best) {
			best, rate = k, r
		}
	}
	return rate, best != ""
}

// coverage is the GPU-hours of the profile an instance can run: shapes
// whose GPUs per node fit in one instance and whose GPU memory fits one of
// its GPUs (not asked: assumed to fit). unfit says what was left out.
func coverage(p api.LoadProfile, in Instance) (float64, string) {
	covered := 0.0
	var tooMany, tooBig float64
	for _, s := range p.Shapes {
		switch {
		case s.GPUs > in.GPUs:
			tooMany += s.GPUHours
		case s.GPUMemoryGB > in.GPUMemoryGB:
			tooBig += s.GPUHours
		default:
			covered += s.GPUHours
		}
	}
	var notes []string
	if tooMany > 0 {
		notes = append(notes, fmt.Sprintf("%.0f GPU-hours of jobs with more than %d GPUs per node left out", tooMany, in.GPUs))
	}
	if tooBig > 0 {
		notes = append(notes, fmt.Sprintf("%.0f GPU-hours of jobs asking more than %gGB per GPU left out", tooBig, in.GPUMemoryGB))
	}
	if len(notes) == 0 {
		notes = append(notes, fmt.Sprintf("every job fits in %d GPUs of %gGB", in.GPUs, in.GPUMemoryGB))
	}
	return covered, strings.Join(notes, "; ")
}
