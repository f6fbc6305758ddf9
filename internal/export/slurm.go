package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// Slurm returns an sbatch script that runs the job as Corral would: one
// task per node, GPUs per node as gres, Corral's rank variables from
// Slurm's (SLURM_NODEID, SLURM_NNODES, the first host of the job).
func Slurm(j api.Job) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	name := j.Name
	if name == "" {
		name = "corral-" + j.ID
	}
	sb := func(format string, a ...any) { fmt.Fprintf(&b, "#SBATCH "+format+"\n", a...) }
	sb("--job-name=%s", name)
	sb("--nodes=%d", nodes(j))
	sb("--ntasks-per-node=1")
	if j.GPUCount > 0 {
		if j.GPUType != "" {
			sb("--gres=gpu:%s:%d", j.GPUType, j.GPUCount)
		} else {
			sb("--gres=gpu:%d", j.GPUCount)
		}
	}
	if c := cpus(j); c > 0 {
		sb("--cpus-per-task=%d", c)
	}
	if j.MemMiB > 0 {
		sb("--mem=%dM", j.MemMiB)
	}
	if j.TimeLimit != nil {
		sb("--time=%s", clock(float64(*j.TimeLimit), true))
	}
	if j.Workdir != "" {
		sb("--chdir=%s", j.Workdir)
	}
	sb("--output=%s-%%j.out", name)
	if j.MaxRetries > 0 {
		sb("--requeue")
	}
	for _, n := range notes(j) {
		b.WriteString("# " + n + "\n")
	}
	if j.MaxRetries > 0 {
		fmt.Fprintf(&b, "# Corral retried a lost attempt up to %d times; --requeue lets Slurm requeue it after a node failure\n", j.MaxRetries)
	}
	if len(j.NodeLabels) > 0 {
		var fs []string
		for _, k := range slices.Sorted(maps.Keys(j.NodeLabels)) {
			fs = append(fs, k+"="+j.NodeLabels[k])
		}
		fmt.Fprintf(&b, "# Corral's node labels %s: Slurm picks nodes by features (--constraint); name the features that match\n", strings.Join(fs, ","))
	}
	b.WriteString("\n")
	for _, k := range sortedEnv(j) {
		fmt.Fprintf(&b, "export %s=%s\n", k, shQuote(j.Env[k]))
	}
	b.WriteString("export CORRAL_MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n")
	inner := rankScript("$SLURM_NODEID", "$SLURM_NNODES", "$CORRAL_MASTER_ADDR", masterPort, j.Command)
	fmt.Fprintf(&b, "srun --ntasks-per-node=1 /bin/sh -c %s\n", shQuote(inner))
	return b.String()
}
