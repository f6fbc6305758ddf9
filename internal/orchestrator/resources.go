package orchestrator

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

// memText writes a memory limit in MiB for a message.
func memText(mib int64) string {
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

// validContainment checks a registration's containment ("" is allowed:
// an agent that does not say).
func validContainment(c string) error {
	switch c {
	case "", api.ContainCgroupV2, api.ContainCgroupV1, api.ContainProcessGroup:
		return nil
	}
	return api.Invalid("containment", "%q: want one of %s, %s, %s", truncate(c, 40),
		api.ContainCgroupV2, api.ContainCgroupV1, api.ContainProcessGroup)
}

// containmentOf is a node's containment as shown: process-group when its
// agent did not say.
func containmentOf(n *Node) string {
	if n.Containment == "" {
		return api.ContainProcessGroup
	}
	return n.Containment
}
