package export

import (
	"fmt"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// PBS returns a PBS Pro script: one chunk per node (select=N with ngpus,
// ncpus, mem), and the command run once per node by pbsdsh with Corral's
// rank variables (PBS_VNODENUM, the first host of $PBS_NODEFILE).
func PBS(j api.Job) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	name := j.Name
	if name == "" {
		name = "corral-" + j.ID
	}
	if len(name) > 236 {
		name = name[:236]
	}
	fmt.Fprintf(&b, "#PBS -N %s\n", name)
	sel := fmt.Sprintf("select=%d", nodes(j))
	if j.GPUCount > 0 {
		sel += fmt.Sprintf(":ngpus=%d", j.GPUCount)
	}
	if c := cpus(j); c > 0 {
		sel += fmt.Sprintf(":ncpus=%d", c)
	}
	if j.MemMiB > 0 {
		sel += fmt.Sprintf(":mem=%dmb", j.MemMiB)
	}
	if j.GPUType != "" {
		sel += ":gpu_type=" + j.GPUType
	}
	for _, k := range sortedKeys(j.NodeLabels) {
		sel += ":" + k + "=" + j.NodeLabels[k]
	}
	fmt.Fprintf(&b, "#PBS -l %s\n", sel)
	b.WriteString("#PBS -l place=scatter\n")
	if j.TimeLimit != nil {
		fmt.Fprintf(&b, "#PBS -l walltime=%s\n", clock(float64(*j.TimeLimit), false))
	}
	b.WriteString("#PBS -j oe\n")
	if j.MaxRetries > 0 {
		b.WriteString("#PBS -r y\n")
	}
	for _, n := range notes(j) {
		b.WriteString("# " + n + "\n")
	}
	if j.GPUType != "" || len(j.NodeLabels) > 0 {
		b.WriteString("# gpu_type and Corral's node labels are written as custom resources of the chunk: the site must define them\n")
	}
	b.WriteString("\n")
	dir := "$PBS_O_WORKDIR"
	if j.Workdir != "" {
		dir = shQuote(j.Workdir)
	}
	// pbsdsh gives its tasks the job's environment, not this shell's:
	// everything the command needs is set inside what each task runs.
	var in strings.Builder
	fmt.Fprintf(&in, "cd %s || exit 1\n", dir)
	for _, k := range sortedEnv(j) {
		fmt.Fprintf(&in, "export %s=%s\n", k, shQuote(j.Env[k]))
	}
	rank := "$PBS_VNODENUM"
	if nodes(j) == 1 {
		rank = "0"
	}
	in.WriteString(rankScript(rank, fmt.Sprint(nodes(j)), `"$(head -n 1 "$PBS_NODEFILE")"`, masterPort, j.Command))
	if nodes(j) == 1 {
		fmt.Fprintf(&b, "exec /bin/sh -c %s\n", shQuote(in.String()))
		return b.String()
	}
	fmt.Fprintf(&b, "pbsdsh -u -- /bin/sh -c %s\n", shQuote(in.String()))
	return b.String()
}
