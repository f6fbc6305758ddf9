package daemon

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// containFlags are an agent's containment flags (`corral up`, `corral
// agent`): whether jobs run in cgroups, and the per-GPU limits of jobs
// that name none.
type containFlags struct {
	mode       string
	memPerGPU  string
	cpusPerGPU float64
	pids       int64
	nodePids   string // --max-pids-per-node: "auto", N, or 0
	runtime    string // --container-runtime (registerRuntime)
	devices    []string
	shared     string // --shared-gpus: GPU indexes, comma-separated
	mpsControl string
	mpsDir     string
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
	fl.StringVar(&c.shared, "shared-gpus", "", "GPUs (indexes, comma-separated, e.g. 0,1) that take MPS shares: jobs asking for a share of a GPU run as clients of its own MPS control daemon, one Unix account at a time (docs/cluster.md#mps-shares)")
	fl.StringVar(&c.mpsControl, "mps-control", "nvidia-cuda-mps-control", "with --shared-gpus: the MPS control binary")
	fl.StringVar(&c.mpsDir, "mps-dir", "", "with --shared-gpus: where each shared GPU's MPS daemon keeps its pipe and log directories (default: corral-mps-<hash> in the system's temporary directory)")
	fl.StringArrayVar(&c.devices, "allow-device", nil, "a character device every job may open besides the closed list (docs/security.md), MAJOR:MINOR or MAJOR:* (repeatable), e.g. 231:* for InfiniBand verbs or 10:229 for /dev/fuse")
	fl.Int64Var(&c.pids, "max-pids-per-job", defaultMaxPids, "the most processes and threads one job attempt may have alive at once on this node (in its cgroup: a fork bomb fails its own forks, the node keeps its pids); 0: no limit")
	fl.StringVar(&c.nodePids, "max-pids-per-node", "auto", "the most processes and threads all jobs on this node together may have alive at once (their parent cgroup's pids.max: past it their forks fail, the rest of the machine keeps the rest); auto: 75% of what the machine can still make at start (the lower of kernel.pid_max and kernel.threads-max, less the tasks alive), at least 1024; 0: no limit")
}

// apply sets the agent's containment from the flags.
func (c containFlags) apply(cfg *agent.Config) error {
	mem, err := cmdkit.ParseMemMiB(c.memPerGPU)
	if err != nil {
		return cmdkit.Usagef("--default-mem-per-gpu: %v", err)
	}
	if c.cpusPerGPU < 0 || math.IsNaN(c.cpusPerGPU) || c.cpusPerGPU > api.MaxCPUs {
		return cmdkit.Usagef("--default-cpus-per-gpu %v: want 0 (no limit) up to %d", c.cpusPerGPU, api.MaxCPUs)
	}
	if c.pids < 0 || c.pids > contain.MaxPids {
		return cmdkit.Usagef("--max-pids-per-job %d: want 0 (no limit) up to %d", c.pids, contain.MaxPids)
	}
	nodePids, err := parseNodePids(c.nodePids)
	if err != nil {
		return err
	}
	cfg.Containment, cfg.DefaultMemPerGPU, cfg.DefaultCPUsPerGPU, cfg.MaxPidsPerJob = c.mode, mem, c.cpusPerGPU, c.pids
	cfg.MaxPidsPerNode = nodePids
	if err := agent.CheckContainerRuntime(c.runtime); err != nil {
		return cmdkit.Usagef("%v", err)
	}
	cfg.ContainerRuntime = c.runtime
	for _, d := range c.devices {
		dev, err := contain.ParseDevice(d)
		if err != nil {
			return cmdkit.Usagef("--allow-device: %v", err)
		}
		if dev.Major == contain.NvidiaMajor {
			return cmdkit.Usagef("--allow-device %s: NVIDIA's GPUs are each job's own, not every job's", d)
		}
		cfg.AllowDevices = append(cfg.AllowDevices, dev)
	}
	for f := range strings.SplitSeq(c.shared, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		g, err := strconv.Atoi(f)
		if err != nil || g < 0 {
			return cmdkit.Usagef("--shared-gpus %q: want GPU indexes, comma-separated, e.g. 0,1", c.shared)
		}
		cfg.SharedGPUs = append(cfg.SharedGPUs, g)
	}
	cfg.MPSControl, cfg.MPSDir = c.mpsControl, c.mpsDir
	return nil
}

// parseNodePids reads --max-pids-per-node: "auto" (contain.DefaultNodePids
// on this machine, now), a count, or 0 (no limit).
func parseNodePids(s string) (int64, error) {
	if s = strings.TrimSpace(s); s == "auto" || s == "" {
		n, err := contain.DefaultNodePids("/proc")
		if err != nil {
			return 0, fmt.Errorf("--max-pids-per-node auto: %w; give a number, or 0 for no limit", err)
		}
		return n, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > contain.MaxPids {
		return 0, cmdkit.Usagef("--max-pids-per-node %q: want auto, 0 (no limit) or a count up to %d", s, contain.MaxPids)
	}
	return n, nil
}

// registerRuntime adds an agent's --container-runtime (corral agent,
// corral up).
func registerRuntime(fl *pflag.FlagSet, runtime *string) {
	fl.StringVar(runtime, "container-runtime", agent.RuntimePodman, "what runs the jobs that name an image (--image): podman, or none (such jobs fail to start)")
}
