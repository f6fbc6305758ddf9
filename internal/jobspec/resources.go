package jobspec

import (
	"fmt"
	"math"

	"github.com/corral-sched/corral/internal/api"
)

// Per-rank resource limits a job may ask for (its cgroup's, on the node).
const (
	maxMemMiB = 1 << 30 // 1 PiB
	minCPUs   = 0.01    // the CFS quota's floor: 1 ms per 100 ms
	maxCPUs   = api.MaxCPUs
)

// validateResources checks a submission's mem_mib and cpus and sets them
// on the job. Missing or 0: the node's per-GPU default (or no limit).
func validateResources(req *api.SubmitRequest, j *api.Job) error {
	if req.MemMiB != nil {
		m := *req.MemMiB
		if m < 0 || m > maxMemMiB {
			return api.Invalid("mem_mib", "must be between 0 (the node's default) and %d MiB, not %d", maxMemMiB, m)
		}
		j.MemMiB = m
	}
	if req.CPUs != nil {
		c := *req.CPUs
		if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 || c > maxCPUs || c > 0 && c < minCPUs {
			return api.Invalid("cpus", "must be 0 (the node's default) or between %v and %d, not %v", minCPUs, maxCPUs, c)
		}
		j.CPUs = c
	}
	return nil
}

// MemText writes a memory limit in MiB for a message.
func MemText(mib int64) string {
	switch {
	case mib == 0:
		return "the node's default"
	case mib%(1<<20) == 0:
		return fmt.Sprintf("%dT", mib>>20)
	case mib%(1<<10) == 0:
		return fmt.Sprintf("%dG", mib>>10)
	}
	return fmt.Sprintf("%dM", mib)
}
