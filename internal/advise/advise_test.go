package advise

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }

func TestProfile(t *testing.T) {
	// Ten hours: 0-4h one 8-GPU job, 2-6h a 2-GPU job (10 GPUs at the
	// peak), a 1-GPU job 8-12h clipped at 10h, and a run wholly before the
	// period, ignored.
	runs := []Run{
		{Start: at(0), End: at(4), GPUs: 8, Nodes: 1, GPUMemoryGB: 60},
		{Start: at(2), End: at(6), GPUs: 2, Nodes: 1},
		{Start: at(8), End: at(12), GPUs: 1, Nodes: 1, GPUMemoryGB: 10},
		{Start: at(-5), End: at(-1), GPUs: 8, Nodes: 2},
	}
	p := Profile(runs, at(0), at(10), map[string]int{"H100": 16})
	if p.Jobs != 3 {
		t.Errorf("jobs = %d, want 3", p.Jobs)
	}
	if want := 8*4 + 2*4 + 1*2.0; math.Abs(p.GPUHours-want) > 1e-9 {
		t.Errorf("gpu hours = %g, want %g", p.GPUHours, want)
	}
	if p.PeakGPUs != 10 || p.MaxJobGPUs != 8 {
		t.Errorf("peak %d, max job %d; want 10, 8", p.PeakGPUs, p.MaxJobGPUs)
	}
	// Levels over 10h: 8 for 2h, 10 for 2h, 2 for 2h, 0 for 2h, 1 for 2h:
	// sorted 0,1,2,8,10 with 2h each; the median (5h) falls in 2, the
	// 90th percentile (9h) in 10.
	if p.TypicalGPUs != 2 || p.P90GPUs != 10 {
		t.Errorf("typical %g, p90 %g; want 2, 10", p.TypicalGPUs, p.P90GPUs)
	}
	if len(p.Shapes) != 3 || p.Shapes[0].GPUs != 8 || p.Shapes[0].GPUHours != 32 {
		t.Errorf("shapes = %+v, want the 8-GPU shape first with 32 GPU-hours", p.Shapes)
	}
}

func TestProfileEmpty(t *testing.T) {
	p := Profile(nil, at(0), at(10), nil)
	if p.GPUHours != 0 || p.PeakGPUs != 0 || p.TypicalGPUs != 0 || p.Shapes == nil || p.ClusterGPUs == nil {
		t.Errorf("empty profile = %+v", p)
	}
	if got := Recommend(p, mustDefault(t)); len(got) != 0 {
		t.Errorf("no load, no cluster: %d options, want none", len(got))
	}
}

func mustDefault(t *testing.T) Prices {
	t.Helper()
	p, err := ParsePrices(DefaultPrices)
	if err != nil {
		t.Fatalf("the shipped price table: %v", err)
	}
	return p
}

func TestRecommend(t *testing.T) {
	prices := Prices{
		Currency:   "USD",
		OnPremises: map[string]float64{"H100": 2},
		Instances: []Instance{
			{Name: "big", Provider: "x", GPU: "H100", GPUs: 8, GPUMemoryGB: 80, OnDemand: 80, Spot: 40},
			{Name: "small", Provider: "x", GPU: "A10G", GPUs: 1, GPUMemoryGB: 24, OnDemand: 1},
		},
	}
	// A 730-hour period (one month): 100 GPU-hours of 1-GPU 10GB jobs and
	// 100 of 4-GPU 60GB jobs, on a 16-GPU cluster.
	p := api.LoadProfile{
		Since: at(0), Until: at(HoursPerMonth), GPUHours: 200, TypicalGPUs: 0, PeakGPUs: 5,
		Shapes: []api.LoadShape{
			{GPUs: 1, GPUMemoryGB: 10, Jobs: 10, GPUHours: 100},
			{GPUs: 4, GPUMemoryGB: 60, Jobs: 2, GPUHours: 100},
		},
		ClusterGPUs: map[string]int{"NVIDIA H100 80GB HBM3": 16},
	}
	got := Recommend(p, prices)
	byName := map[string]Option{}
	for _, o := range got {
		byName[strings.Fields(o.Name)[0]+" "+strings.Fields(o.Name)[1]] = o
	}
	tests := []struct {
		name    string
		monthly float64
		covers  float64
	}{
		{"cluster (on", 16 * HoursPerMonth * 2, 1},
		{"big on-demand", 200.0 / 8 * 80, 1},
		{"big spot", 200.0 / 8 * 40, 1},
		{"small on-demand", 100 * 1, 0.5},
	}
	for _, tc := range tests {
		o, ok := byName[tc.name]
		if !ok {
			t.Errorf("no option %q in %+v", tc.name, got)
			continue
		}
		if math.Abs(o.Monthly-tc.monthly) > 1e-6 || math.Abs(o.Covers-tc.covers) > 1e-9 {
			t.Errorf("%s: monthly %g covers %g; want %g, %g", tc.name, o.Monthly, o.Covers, tc.monthly, tc.covers)
		}
	}
	if _, ok := byName["small spot"]; ok {
		t.Error("an instance without a spot price got a spot option")
	}
	// Full cover first, cheapest first; the partial option last.
	if got[0].Name[:8] != "big spot" || got[len(got)-1].Covers != 0.5 {
		t.Errorf("order: %v", names(got))
	}
	if !strings.Contains(byName["small on-demand"].Rationale, "more than 1 GPUs per node left out") {
		t.Errorf("partial option's rationale does not say what was left out: %s", byName["small on-demand"].Rationale)
	}
	if !strings.Contains(byName["cluster (on"].Rationale, "under half used") {
		t.Errorf("an idle cluster's rationale says nothing of it: %s", byName["cluster (on"].Rationale)
	}
}

func names(os []Option) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Name)
	}
	return out
}

func TestParsePricesErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"instances": []}`, "instances: none listed"},
		{`{"instances": [{"name": "a", "gpus": 0, "gpu_memory_gb": 1, "on_demand": 1}]}`, "instances[0] (a).gpus"},
		{`{"instances": [{"name": "a", "gpus": 1, "gpu_memory_gb": 0, "on_demand": 1}]}`, "gpu_memory_gb"},
		{`{"instances": [{"name": "a", "gpus": 1, "gpu_memory_gb": 1, "on_demand": 0}]}`, "on_demand must be above 0"},
		{`{"instances": [{"name": "", "gpus": 1}]}`, "instances[0].name"},
		{`{"instancez": []}`, "unknown field"},
		{`{"on_premises": {"H100": -1}, "instances": [{"name": "a", "gpus": 1, "gpu_memory_gb": 1, "on_demand": 1}]}`, "on_premises.H100"},
	}
	for _, tc := range tests {
		if _, err := ParsePrices([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePrices(%s) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	p := mustDefault(t)
	families := map[string]bool{}
	for _, in := range p.Instances {
		families[in.GPU] = true
	}
	for _, f := range []string{"H100", "A100", "A10G", "T4"} {
		if !families[f] {
			t.Errorf("the shipped table has no %s instance", f)
		}
	}
}
