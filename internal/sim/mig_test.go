package sim

import (
	"fmt"
	"testing"

	"github.com/corral-sched/corral/internal/sched"
)

// TestMIGLayout: on one node of 2 GPUs, GPU 0 in seven 1g.10gb slices,
// eight notebook-sized jobs asking for a slice take the seven at once and
// the eighth waits for one; whole-GPU jobs take GPU 1, never GPU 0.
func TestMIGLayout(t *testing.T) {
	var lines []string
	for i := range 8 {
		lines = append(lines, fmt.Sprintf(`{"id":"nb%d","submit":%d,"duration_s":3600,"gpus":1,"user":"u%d","mig_profile":"1g.10gb"}`, i, i, i))
	}
	lines = append(lines, `{"id":"w","submit":10,"duration_s":600,"gpus":1,"user":"w"}`,
		`{"id":"w2","submit":11,"duration_s":600,"gpus":1,"user":"w"}`)
	slices := make([]sched.Slice, 7)
	for i := range slices {
		slices[i] = sched.Slice{Profile: "1g.10gb", MemoryMiB: 10 << 10, ComputeSlices: 1}
	}
	for _, policy := range []string{sched.PolicyFCFS, sched.PolicyFairShare} {
		t.Run(policy, func(t *testing.T) {
			out, err := Run(jsonl(t, lines...), Config{Nodes: 1, NodeGPUs: 2, Policy: sched.Policy{Name: policy, Backfill: true},
				Record: true, MIG: map[int][]sched.Slice{0: slices}})
			if err != nil {
				t.Fatal(err)
			}
			at := starts(out)
			for i := range 7 {
				if s, ok := at[fmt.Sprintf("nb%d", i)]; !ok || s != float64(i) {
					t.Errorf("nb%d starts at %v (%v), want at its submission %d", i, s, ok, i)
				}
			}
			if at["nb7"] != 3600 {
				t.Errorf("nb7 starts at %v, want 3600 (when nb0's slice frees)", at["nb7"])
			}
			if at["w"] != 10 || at["w2"] != 610 {
				t.Errorf("whole jobs start at %v and %v, want 10 and 610 (GPU 1 only)", at["w"], at["w2"])
			}
			for _, d := range out.Decisions {
				if p := d.Placements[0]; d.Kind == "start" && p.Part == nil && p.GPUs[0] == 0 {
					t.Errorf("%s got MIG GPU 0 whole", d.JobID)
				}
			}
			if out.Metrics.Completed != 10 {
				t.Errorf("%d of 10 jobs completed", out.Metrics.Completed)
			}
		})
	}
}
