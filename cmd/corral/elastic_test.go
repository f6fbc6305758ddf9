package main

import (
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestGPUsFlag(t *testing.T) {
	tests := map[string]struct {
		in       string
		min, max int
		bad      bool
	}{
		"a count":          {in: "4", max: 4},
		"zero":             {in: "0", max: 0},
		"a range":          {in: "4-8", min: 4, max: 8},
		"a range of one":   {in: "8-8", min: 8, max: 8},
		"min above max":    {in: "8-4", bad: true},
		"min of zero":      {in: "0-4", bad: true},
		"not a number":     {in: "four", bad: true},
		"an open range":    {in: "4-", bad: true},
		"a negative count": {in: "-4", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var min, max int
			err := gpusValue{min: &min, max: &max}.Set(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("%q accepted as %d-%d", tc.in, min, max)
				}
				return
			}
			if err != nil || min != tc.min || max != tc.max {
				t.Fatalf("%q = %d-%d, %v; want %d-%d", tc.in, min, max, err, tc.min, tc.max)
			}
		})
	}
}

func TestFmtJobGPUs(t *testing.T) {
	tests := map[string]struct {
		job  api.Job
		want string
	}{
		"fixed":           {api.Job{GPUCount: 4, Nodes: 1}, "4"},
		"gang":            {api.Job{GPUCount: 8, Nodes: 2}, "2x8"},
		"elastic, queued": {api.Job{GPUCount: 8, GPUCountMin: 4, Nodes: 1}, "4-8"},
		"elastic, given":  {api.Job{GPUCount: 8, GPUCountMin: 4, Nodes: 1, GrantedGPUs: 6}, "6 (4-8)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := fmtJobGPUs(tc.job); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
