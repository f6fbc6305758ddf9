package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// containFlags are an agent's containment flags (`corral up`, `corral
// agent`): whether jobs run in cgroups, and the per-GPU limits of jobs
// that name none.
type containFlags struct {
	mode       string
	memPerGPU  string
	cpusPerGPU float64
	pids       int64
	runtime    string // --container-runtime (imageflags.go)
}

// defaultMaxPids is --max-pids-per-job's default: room for any training
// job's ranks, data-loader workers and their threads, far below a node's
// pid space (32,768 at the least).
const defaultMaxPids = 8192

func (c *containFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.mode, "containment", "auto", "how jobs are held: auto (each attempt in a cgroup of its own where cgroups can be written, process groups otherwise) or process-group")
	fl.StringVar(&c.memPerGPU, "default-mem-per-gpu", "", "memory limit per GPU of a job that names no --mem, e.g. 64G (a job gets this times its GPUs); empty or 0: no limit")
	fl.Float64Var(&c.cpusPerGPU, "default-cpus-per-gpu", 0, "CPU limit per GPU of a job that names no --cpus (a job gets this times its GPUs); 0: no limit")
	registerRuntime(fl, &c.runtime)
	fl.Int64Var(&c.pids, "max-pids-per-job", defaultMaxPids, "the most processes and threads one job attempt may have alive at once on this node (in its cgroup: a fork bomb fails its own forks, the node keeps its pids); 0: no limit")
}

// apply sets the agent's containment from the flags.
func (c containFlags) apply(cfg *agent.Config) error {
	mem, err := parseMemMiB(c.memPerGPU)
	if err != nil {
		return usagef("--default-mem-per-gpu: %v", err)
	}
	if c.cpusPerGPU < 0 || math.IsNaN(c.cpusPerGPU) || c.cpusPerGPU > api.MaxCPUs {
		return usagef("--default-cpus-per-gpu %v: want 0 (no limit) up to %d", c.cpusPerGPU, api.MaxCPUs)
	}
	if c.pids < 0 || c.pids > contain.MaxPids {
		return usagef("--max-pids-per-job %d: want 0 (no limit) up to %d", c.pids, contain.MaxPids)
	}
	cfg.Containment, cfg.DefaultMemPerGPU, cfg.DefaultCPUsPerGPU, cfg.MaxPidsPerJob = c.mode, mem, c.cpusPerGPU, c.pids
	if err := agent.CheckContainerRuntime(c.runtime); err != nil {
		return usagef("%v", err)
	}
	cfg.ContainerRuntime = c.runtime
	return nil
}

// parseMemMiB reads a memory size in MiB: a number with an optional
// binary unit, K, M (the default), G or T (also KiB, MB, ...), as Slurm's
// --mem. "" and "0" are 0 (no limit).
func parseMemMiB(s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	b, ok := parseSize(s, 1<<20)
	if !ok {
		return 0, fmt.Errorf("%q: want a size such as 512M, 64G or 1T", s)
	}
	mib := b / (1 << 20)
	if mib > 1<<40 {
		return 0, fmt.Errorf("%q: want 0 up to 1024P", s)
	}
	return int64(math.Ceil(mib)), nil
}
