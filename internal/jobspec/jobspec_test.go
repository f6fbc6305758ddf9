package jobspec

import (
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func gpus(n int) *int { return &n }

// TestValidateElastic: gpu_count_min and elastic_wait are checked against
// the job's count and nodes, each error naming its field.
func TestValidateElastic(t *testing.T) {
	c := Capacity{Nodes: 2, MaxGPUs: 8, MaxMemoryGB: 80, Models: []string{"H100"}, LargestNode: "n1"}
	tests := map[string]struct {
		req       api.SubmitRequest
		wantField string
		wantMin   int
		wantWait  time.Duration
	}{
		"a range":                     {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(4)}, wantMin: 4},
		"a range with a wait":         {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(4), ElasticWait: api.RawValue(`"10m"`)}, wantMin: 4, wantWait: 10 * time.Minute},
		"the wait in seconds":         {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(1), ElasticWait: api.RawValue(`90`)}, wantMin: 1, wantWait: 90 * time.Second},
		"min equal to max is fixed":   {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(8), ElasticWait: api.RawValue(`"1m"`)}},
		"min above max":               {req: api.SubmitRequest{GPUCount: gpus(4), GPUCountMin: gpus(8)}, wantField: "gpu_count_min"},
		"min of zero":                 {req: api.SubmitRequest{GPUCount: gpus(4), GPUCountMin: gpus(0)}, wantField: "gpu_count_min"},
		"negative min":                {req: api.SubmitRequest{GPUCount: gpus(4), GPUCountMin: gpus(-1)}, wantField: "gpu_count_min"},
		"no GPUs to shrink":           {req: api.SubmitRequest{GPUCount: gpus(0), GPUCountMin: gpus(1)}, wantField: "gpu_count_min"},
		"a gang":                      {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(4), Nodes: 2}, wantField: "gpu_count_min"},
		"a wait without a range":      {req: api.SubmitRequest{GPUCount: gpus(8), ElasticWait: api.RawValue(`"10m"`)}, wantField: "elastic_wait"},
		"a wait that is no duration":  {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(4), ElasticWait: api.RawValue(`"soon"`)}, wantField: "elastic_wait"},
		"a negative wait":             {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(4), ElasticWait: api.RawValue(`-5`)}, wantField: "elastic_wait"},
		"a wait past a week":          {req: api.SubmitRequest{GPUCount: gpus(8), GPUCountMin: gpus(4), ElasticWait: api.RawValue(`"200h"`)}, wantField: "elastic_wait"},
		"a maximum larger than nodes": {req: api.SubmitRequest{GPUCount: gpus(16), GPUCountMin: gpus(4)}, wantField: "gpu_count"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.req.Command = "true"
			j, err := Parse(&tc.req, c)
			var ae *api.Error
			switch {
			case tc.wantField != "":
				if !errors.As(err, &ae) || ae.Field != tc.wantField || ae.Status != 422 {
					t.Fatalf("err = %v, want 422 naming %s", err, tc.wantField)
				}
				return
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			var wait time.Duration
			if j.ElasticWait != nil {
				wait = j.ElasticWait.Duration()
			}
			if j.GPUCountMin != tc.wantMin || wait != tc.wantWait {
				t.Fatalf("min %d wait %v, want %d %v", j.GPUCountMin, wait, tc.wantMin, tc.wantWait)
			}
		})
	}
}

// A notebook runs on one node: a gang notebook is refused naming
// notebook, and one on a node gets its secret.
func TestValidateNotebook(t *testing.T) {
	err := validateNotebook(&api.SubmitRequest{Notebook: true}, &api.Job{Nodes: 2})
	if e, ok := err.(*api.Error); !ok || e.Field != "notebook" {
		t.Errorf("a notebook on 2 nodes: %v", err)
	}
	j := api.Job{Nodes: 1}
	if err := validateNotebook(&api.SubmitRequest{Notebook: true}, &j); err != nil || !j.Notebook || len(j.Env[api.NotebookTokenVar]) != 48 {
		t.Errorf("a notebook on 1 node: %v, %+v", err, j)
	}
}
