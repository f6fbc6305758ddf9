package exec

import (
	"maps"
	"slices"

	"github.com/corral-sched/corral/internal/api"
)

// NewTask is the task that runs job j's current attempt on ranks (rank 0
// first, each a node and the indexes of its GPUs there), with rank 0's
// output appended to logPath and its preemption notice written to
// noticePath. The job's fields are copied (its env and mounts cloned, so
// the executor may change them); each rank's GPU UUIDs, and a MIG slice or
// an MPS share the job holds, come from its allocation. What the caller
// adds to the env (an array task's, a notebook's) it adds after.
func NewTask(j *api.Job, ranks []Rank, logPath, noticePath string) Task {
	t := Task{JobID: j.ID, Attempt: j.RetryCount, Command: j.Command, Workdir: j.Workdir, Env: maps.Clone(j.Env), User: j.User,
		LogPath: logPath, NoticePath: noticePath, GPUs: []int{}}
	t.MemMiB, t.CPUs = j.MemMiB, j.CPUs
	t.Script, t.Output, t.Error, t.Signal = j.Script, j.Output, j.Error, j.Signal
	t.Name, t.ArrayJobID, t.ArrayTask = j.Name, j.ArrayJobID, j.ArrayTaskID
	t.Image, t.Mounts = j.Image, slices.Clone(j.Mounts)
	if j.TimeLimit != nil {
		t.TimeLimit = j.TimeLimit.Duration()
	}
	for _, rk := range ranks {
		r := Rank{NodeID: rk.NodeID, GPUs: append([]int{}, rk.GPUs...)}
		for _, a := range j.Allocation {
			if a.NodeID == rk.NodeID {
				r.GPUUUIDs = append(r.GPUUUIDs, a.GPUUUID)
			}
			switch { // a slice or a share: what the node needs to run it
			case a.NodeID != rk.NodeID:
			case a.MIG != nil && a.MIG.UUID != "":
				t.MIGDevices = append(t.MIGDevices, a.MIG.UUID)
			case a.ShareMiB > 0:
				t.GPUShareMiB, t.GPUCompute = a.ShareMiB, a.ShareCompute
			}
		}
		t.Ranks = append(t.Ranks, r)
	}
	if len(t.Ranks) > 0 {
		t.NodeID, t.GPUs, t.GPUUUIDs = t.Ranks[0].NodeID, t.Ranks[0].GPUs, t.Ranks[0].GPUUUIDs
	}
	return t
}
