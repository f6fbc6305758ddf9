// Package export writes a Corral job as the equivalent job of another
// scheduler: an sbatch script (Slurm), a Kubernetes Job manifest, or a PBS
// script, so that a team can move work to another cluster (`corral export
// slurm|k8s|pbs JOB`). The functions are pure: a job in, text out.
//
// What carries over: the command, workdir, env, GPUs per node and their
// type, nodes, memory and CPUs per rank, the time limit, retries and node
// labels, and Corral's rank variables (CORRAL_NODE_RANK, CORRAL_NUM_NODES,
// CORRAL_MASTER_ADDR, ... from the target's own). What does not (Corral's
// priority, project, dependencies, notifications) is written as comments.
package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// Formats are the names `corral export` takes.
var Formats = []string{"slurm", "k8s", "pbs"}

// Options are what the target needs that a Corral job does not say.
type Options struct {
	// Image is the container image of the Kubernetes Job (Corral runs
	// commands on the host). Default DefaultImage.
	Image string
}

// DefaultImage is the Kubernetes Job's image when Options.Image is empty.
const DefaultImage = "ubuntu:24.04"

// Write returns the job in format ("slurm", "k8s" or "pbs").
func Write(format string, j api.Job, o Options) (string, error) {
	switch format {
	case "slurm":
		return Slurm(j), nil
	case "k8s":
		return Kubernetes(j, o), nil
	case "pbs":
		return PBS(j), nil
	}
	return "", fmt.Errorf("export format %q: want slurm, k8s or pbs", format)
}

// shQuote returns s as one single-quoted shell word.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// envName reports whether k can be exported by a shell.
func envName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// sortedEnv is the job's env that a shell can export, by name.
func sortedEnv(j api.Job) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(j.Env)) {
		if envName(k) {
			out = append(out, k)
		}
	}
	return out
}

// nodes is the job's node count (at least 1).
func nodes(j api.Job) int { return max(j.Nodes, 1) }

// clock writes seconds as [D-]HH:MM:SS (days only with dayForm), rounded up.
func clock(secs float64, dayForm bool) string {
	s := int64(secs)
	if float64(s) < secs {
		s++
	}
	d, h, m := s/86400, s%86400/3600, s%3600/60
	s %= 60
	if dayForm && d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	}
	return fmt.Sprintf("%02d:%02d:%02d", d*24+h, m, s)
}

// cpus is the job's CPUs per rank, rounded up; 0: none asked.
func cpus(j api.Job) int {
	c := int(j.CPUs)
	if float64(c) < j.CPUs {
		c++
	}
	return c
}

// notes are comment lines about what the target does not take as is.
func notes(j api.Job) []string {
	out := []string{fmt.Sprintf("exported from Corral job %s (user %s, project %s)", j.ID, j.User, j.Project)}
	if j.Priority != 0 {
		out = append(out, fmt.Sprintf("Corral priority: %s", j.Priority))
	}
	if j.DependsOn != "" {
		out = append(out, fmt.Sprintf("Corral dependencies (Corral job ids): %s", j.DependsOn))
	}
	if j.GPUCountMin > 0 {
		out = append(out, fmt.Sprintf("elastic in Corral: %d to %d GPUs; exported with %d", j.GPUCountMin, j.GPUCount, j.GPUCount))
	}
	if j.GPUMemoryGB > 0 {
		out = append(out, fmt.Sprintf("Corral asked for GPUs with at least %g GB of memory", j.GPUMemoryGB))
	}
	return out
}

// rankScript is the shell text that sets Corral's rank variables from the
// target's own, then runs the command.
func rankScript(rank, num, master, port string, cmd string) string {
	return fmt.Sprintf(`export CORRAL_NODE_RANK=%s NODE_RANK=%s CORRAL_NUM_NODES=%s
export CORRAL_MASTER_ADDR=%s MASTER_ADDR=%s CORRAL_MASTER_PORT=%s MASTER_PORT=%s
%s`, rank, rank, num, master, master, port, port, cmd)
}

// masterPort is the rendezvous port written into exports.
const masterPort = "29500"
