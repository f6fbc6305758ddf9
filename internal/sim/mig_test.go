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

// TestShares: with shared GPUs a trace's jobs with gpu_share_mib run as
// MPS shares, packed by memory and compute, one user per GPU, never on a
// GPU a whole job holds; without shared GPUs they take GPUs whole.
func TestShares(t *testing.T) {
	share := func(id string, at int, user string, gb, compute int) string {
		return fmt.Sprintf(`{"id":%q,"submit":%d,"duration_s":3600,"gpus":1,"user":%q,"gpu_share_mib":%d,"gpu_compute":%d}`, id, at, user, gb<<10, compute)
	}
	tests := map[string]struct {
		lines  []string
		gpus   int
		shared int
		want   map[string]float64 // job -> start (s)
	}{
		"four 20 GB shares on one 80 GB GPU at once": {
			lines: []string{share("a", 0, "u", 20, 0), share("b", 0, "u", 20, 0), share("c", 0, "u", 20, 0), share("d", 0, "u", 20, 0), share("e", 0, "u", 20, 0)},
			gpus:  1, shared: 1,
			want: map[string]float64{"a": 0, "b": 0, "c": 0, "d": 0, "e": 3600},
		},
		"compute is never over-committed": {
			lines: []string{share("a", 0, "u", 10, 60), share("b", 0, "u", 10, 60)},
			gpus:  1, shared: 1,
			want: map[string]float64{"a": 0, "b": 3600},
		},
		"another user's shares wait for the GPU": {
			lines: []string{share("a", 0, "ann", 10, 0), share("b", 1, "bob", 10, 0), share("c", 2, "ann", 10, 0)},
			gpus:  1, shared: 1,
			want: map[string]float64{"a": 0, "b": 3602, "c": 2}, // b waits for both of ann's
		},
		"a whole job keeps shares off; shares keep it off": {
			lines: []string{`{"id":"w","submit":0,"duration_s":600,"gpus":1,"user":"u"}`, share("a", 1, "u", 10, 0),
				`{"id":"w2","submit":700,"duration_s":600,"gpus":1,"user":"u"}`},
			gpus: 1, shared: 1,
			want: map[string]float64{"w": 0, "a": 600, "w2": 4200},
		},
		"without shared GPUs a share takes a GPU whole": {
			lines: []string{share("a", 0, "u", 20, 0), share("b", 0, "u", 20, 0)},
			gpus:  1,
			want:  map[string]float64{"a": 0, "b": 3600},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Run(jsonl(t, tc.lines...), Config{Nodes: 1, NodeGPUs: tc.gpus, Shared: tc.shared,
				Policy: sched.Policy{Name: sched.PolicyFCFS, Backfill: true}, Record: true})
			if err != nil {
				t.Fatal(err)
			}
			at := starts(out)
			for id, want := range tc.want {
				if got, ok := at[id]; !ok || got != want {
					t.Errorf("%s starts at %v (%v), want %v", id, got, ok, want)
				}
			}
			if out.Metrics.Completed != len(tc.lines) {
				t.Errorf("%d of %d jobs completed", out.Metrics.Completed, len(tc.lines))
			}
		})
	}
}
