package exec

import (
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestNewTask(t *testing.T) {
	limit := api.Seconds(90)
	for _, tc := range []struct {
		name  string
		job   api.Job
		ranks []Rank
		check func(Task) bool
	}{
		{"no GPUs", api.Job{ID: "a", Command: "true", RetryCount: 2, MemMiB: 512, CPUs: 1.5, TimeLimit: &limit}, []Rank{{NodeID: "n1"}},
			func(t Task) bool {
				return t.JobID == "a" && t.Attempt == 2 && t.Command == "true" && t.MemMiB == 512 && t.CPUs == 1.5 && t.TimeLimit == 90*time.Second &&
					t.NodeID == "n1" && len(t.GPUs) == 0 && t.GPUs != nil && len(t.Ranks) == 1 && t.LogPath == "log" && t.NoticePath == "notice"
			}},
		{"two nodes, rank 0 first", api.Job{Allocation: []api.Allocation{{NodeID: "n2", GPUID: 3, GPUUUID: "u23"}, {NodeID: "n1", GPUID: 0, GPUUUID: "u10"}, {NodeID: "n1", GPUID: 1, GPUUUID: "u11"}}},
			[]Rank{{NodeID: "n1", GPUs: []int{0, 1}}, {NodeID: "n2", GPUs: []int{3}}},
			func(t Task) bool {
				return t.NodeID == "n1" && slices.Equal(t.GPUs, []int{0, 1}) && slices.Equal(t.GPUUUIDs, []string{"u10", "u11"}) &&
					len(t.Ranks) == 2 && t.Ranks[1].NodeID == "n2" && slices.Equal(t.Ranks[1].GPUUUIDs, []string{"u23"})
			}},
		{"a MIG slice", api.Job{Allocation: []api.Allocation{{NodeID: "n1", GPUUUID: "g", MIG: &api.AllocatedSlice{UUID: "MIG-1"}}}}, []Rank{{NodeID: "n1", GPUs: []int{0}}},
			func(t Task) bool { return slices.Equal(t.MIGDevices, []string{"MIG-1"}) && t.GPUShareMiB == 0 }},
		{"an MPS share", api.Job{Allocation: []api.Allocation{{NodeID: "n1", GPUUUID: "g", ShareMiB: 4096, ShareCompute: 25}}}, []Rank{{NodeID: "n1", GPUs: []int{0}}},
			func(t Task) bool { return t.GPUShareMiB == 4096 && t.GPUCompute == 25 && len(t.MIGDevices) == 0 }},
	} {
		if got := NewTask(&tc.job, tc.ranks, "log", "notice"); !tc.check(got) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

// TestNewTaskCopies: the task's env, mounts and GPU lists are its own.
func TestNewTaskCopies(t *testing.T) {
	j := api.Job{Env: map[string]string{"A": "1"}, Image: "img", Mounts: []string{"/a:/a"}}
	ranks := []Rank{{NodeID: "n1", GPUs: []int{0}}}
	task := NewTask(&j, ranks, "", "")
	task.Env["A"], task.Mounts[0], task.GPUs[0] = "2", "/b:/b", 7
	if j.Env["A"] != "1" || j.Mounts[0] != "/a:/a" || ranks[0].GPUs[0] != 0 {
		t.Fatalf("the job or the ranks changed: %v %v %v", j.Env, j.Mounts, ranks[0].GPUs)
	}
}
