package jobspec

import (
	"errors"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestValidateGPUPart: a MIG slice or an MPS share is one GPU on one
// node, one or the other, each error naming its field.
func TestValidateGPUPart(t *testing.T) {
	c := Capacity{Nodes: 2, MaxGPUs: 8, MaxMemoryGB: 80, Models: []string{"H100"}, LargestNode: "n1"}
	mig := func(p string) api.GPUPart { return api.GPUPart{MIGProfile: p} }
	share := func(mib int64, pct int) api.GPUPart { return api.GPUPart{GPUShareMiB: mib, GPUCompute: pct} }
	tests := map[string]struct {
		part      api.GPUPart
		count     *int
		nodes     int
		min       *int
		booking   string
		wantField string
		want      api.GPUPart
	}{
		"a profile":                {part: mig(" 3G.40GB "), want: mig("3g.40gb")},
		"any":                      {part: mig("any"), want: mig("any")},
		"a compute-instance slice": {part: mig("1c.3g.40gb"), want: mig("1c.3g.40gb")},
		"a share":                  {part: share(20480, 25), want: share(20480, 25)},
		"a share, no compute":      {part: share(20480, 0), want: share(20480, 0)},
		"not a profile":            {part: mig("big"), wantField: "mig_profile"},
		"both":                     {part: api.GPUPart{MIGProfile: "any", GPUShareMiB: 1024}, wantField: "gpu_share_mib"},
		"negative share":           {part: share(-1, 0), wantField: "gpu_share_mib"},
		"compute without share":    {part: api.GPUPart{GPUCompute: 50}, wantField: "gpu_compute"},
		"compute over 100":         {part: share(1024, 101), wantField: "gpu_compute"},
		"two GPUs":                 {part: mig("any"), count: gpus(2), wantField: "gpu_count"},
		"no GPU":                   {part: share(1024, 0), count: gpus(0), wantField: "gpu_count"},
		"a gang":                   {part: mig("any"), nodes: 2, wantField: "nodes"},
		"elastic":                  {part: mig("any"), count: gpus(2), min: gpus(1), wantField: "gpu_count"},
		"in a booking":             {part: share(1024, 0), booking: "b", wantField: "reservation"},
		"whole GPUs":               {count: gpus(4)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := api.SubmitRequest{Command: "true", GPUCount: tc.count, Nodes: tc.nodes, GPUCountMin: tc.min, Reservation: tc.booking, GPUPart: tc.part}
			j, err := Parse(&req, c)
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
			if j.GPUPart != tc.want {
				t.Fatalf("part %+v, want %+v", j.GPUPart, tc.want)
			}
		})
	}
}
