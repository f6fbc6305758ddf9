package slurm

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/batchscript"
	"github.com/corral-sched/corral/internal/exec"
)

// JobName is the Slurm job name of a Corral attempt; Adopt finds the
// attempt by it after a server restart.
func JobName(jobID string, attempt int) string {
	return fmt.Sprintf("corral-%s-a%d", jobID, attempt)
}

// quote returns s as one single-quoted shell word.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validEnvName reports whether k can be exported by a POSIX shell.
func validEnvName(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// scriptSpec is what the batch script of one attempt needs beyond the task.
type scriptSpec struct {
	Task       exec.Task
	Ranks      []exec.Rank
	MasterAddr string
	MasterPort int
	ExitPath   string // where the batch step writes the attempt's exit status
}

// Script returns the batch script of an attempt. Run by sbatch (no
// argument), it is the batch step: it starts every rank as one step
// (srun, one task per node), waits, writes the exit status to ExitPath
// and exits with it. Run with the argument "rank"
// it is one rank: it sets Corral's per-node variables from the node it
// runs on and runs the job's command with bash -c (sh -c where the node
// has no bash). Slurm sets
// CUDA_VISIBLE_DEVICES from the allocated gres.
func script(s scriptSpec) string {
	t := s.Task
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "# Corral job %s, attempt %d: the batch script of Corral's Slurm executor.\n", t.JobID, t.Attempt)
	// The job's env over the base sbatch passes on (slurmEnv: the
	// account's HOME, USER, LOGNAME, SHELL and a system PATH), less
	// Slurm's own variables: those of the submitter's shell (a
	// submission from inside a Slurm job) would mislead srun and the job.
	env := map[string]string{}
	for k, v := range t.Env {
		if validEnvName(k) && !strings.HasPrefix(k, "SLURM_") && !strings.HasPrefix(k, "SLURMD_") {
			env[k] = v
		}
	}
	master := s.MasterAddr
	if master == "" {
		master = "127.0.0.1"
	}
	for k, v := range map[string]string{
		"CORRAL_JOB_ID": t.JobID, "CORRAL_ATTEMPT": strconv.Itoa(t.Attempt), "CORRAL_NUM_NODES": strconv.Itoa(len(s.Ranks)),
		"CORRAL_MASTER_ADDR": master, "CORRAL_MASTER_PORT": strconv.Itoa(s.MasterPort),
		"MASTER_ADDR": master, "MASTER_PORT": strconv.Itoa(s.MasterPort), "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
		"CORRAL_PREEMPT_NOTICE": t.NoticePath,
	} {
		env[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "export %s=%s\n", k, quote(env[k]))
	}
	b.WriteString(`if [ "${1:-}" != rank ]; then
`)
	gang := len(s.Ranks) > 1
	if gang {
		// A gang runs every rank as one step (srun): scancel
		// --signal=TERM reaches the ranks' processes, not srun (which
		// would end the step at once) nor this shell.
		fmt.Fprintf(&b, "\tsrun --quiet --nodes=%d --ntasks=%d --ntasks-per-node=1 --kill-on-bad-exit=1 /bin/sh \"$0\" rank </dev/null &\n", len(s.Ranks), len(s.Ranks))
		b.WriteString(waitLoop(""))
	} else {
		// One node: the rank runs in the batch step itself, and
		// scancel --batch --signal=TERM reaches this shell only: it
		// passes SIGTERM on to the rank, which passes it to the job.
		b.WriteString("\t/bin/sh \"$0\" rank </dev/null &\n")
		b.WriteString(waitLoop("kill -TERM $pid 2>/dev/null"))
	}
	fmt.Fprintf(&b, `	printf '%%s\n' "$rc" >%s.tmp && mv -f %s.tmp %s
	exit $rc
fi
`, quote(s.ExitPath), quote(s.ExitPath), quote(s.ExitPath))
	if len(s.Ranks) > 1 {
		b.WriteString("case \"${SLURMD_NODENAME:-}\" in\n")
		for i, r := range s.Ranks {
			fmt.Fprintf(&b, "%s) r=%d g=%s u=%s ;;\n", quote(r.NodeID), i, quote(joinInts(r.GPUs)), quote(strings.Join(r.GPUUUIDs, ",")))
		}
		b.WriteString("*) echo \"corral: node ${SLURMD_NODENAME:-?} is not in this job's placement\" >&2; exit 1 ;;\nesac\n")
	} else {
		r := s.Ranks[0]
		fmt.Fprintf(&b, "r=0 g=%s u=%s\n", quote(joinInts(r.GPUs)), quote(strings.Join(r.GPUUUIDs, ",")))
	}
	b.WriteString(`export CORRAL_NODE_RANK=$r NODE_RANK=$r CORRAL_NODE_ID="${SLURMD_NODENAME:-}" CORRAL_GPUS="$g" CORRAL_GPU_UUIDS="$u"
if [ -z "$g" ]; then n=0; else n=$(echo "$g" | tr ',' '\n' | wc -l); fi
export CORRAL_NUM_GPUS=$n
if [ -z "${CUDA_VISIBLE_DEVICES+x}" ] || [ "$n" = 0 ]; then export CUDA_VISIBLE_DEVICES=""; fi
if [ -n "$CUDA_VISIBLE_DEVICES" ]; then export NVIDIA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"; else export NVIDIA_VISIBLE_DEVICES=void; fi
`)
	// The command runs in a session of its own; when it ends, whatever is
	// left of its process group is killed (Slurm's proctrack/linuxproc
	// loses processes whose parent died).
	command := t.Command
	if t.Script != "" { // a batch script: written on the node, run by its #! line
		command = batchscript.ShellCommand(t.Script, t.Command)
	}
	// Under bash where the node has it, else sh (docs/jobs.md).
	b.WriteString("sh=/bin/sh; if [ -x /bin/bash ]; then sh=/bin/bash; elif [ -x /usr/bin/bash ]; then sh=/usr/bin/bash; fi\n")
	fmt.Fprintf(&b, "setsid \"$sh\" -c %s </dev/null &\n", quote(command))
	forward := ""
	if !gang {
		forward = "kill -TERM -$pid 2>/dev/null" // the job's session, from the batch shell's SIGTERM
	}
	b.WriteString(strings.ReplaceAll(waitLoop(forward), "\n\t", "\n")[1:])
	b.WriteString("kill -KILL -$pid 2>/dev/null\nexit $rc\n")
	return b.String()
}

// waitLoop waits for $pid and leaves its exit status in $rc; on SIGTERM
// it runs forward (empty: nothing). A SIGTERM interrupts wait: it waits
// again for the status the process exits with (127: the shell had already
// reported it).
func waitLoop(forward string) string {
	trap := "t=1"
	if forward != "" {
		trap += "; " + forward
	}
	return `	pid=$! t=0
	trap '` + trap + `' TERM
	wait $pid
	rc=$?
	while [ $t = 1 ] && [ $rc -gt 128 ]; do
		t=0
		wait $pid
		r=$?
		[ $r = 127 ] || rc=$r
	done
`
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// sbatchArgs are the arguments of the attempt's sbatch, without the
// script's path. grace is how long before Slurm's time limit the batch
// step gets SIGTERM.
func sbatchArgs(c Config, t exec.Task, ranks []exec.Rank, logPath string) []string {
	nodes := make([]string, len(ranks))
	gpus := 0
	for i, r := range ranks {
		nodes[i] = r.NodeID
		gpus = max(gpus, len(r.GPUs))
	}
	args := []string{"--parsable",
		"--export=ALL", // of sbatch's environment: Slurm's settings and the account's base (slurmEnv), whatever SBATCH_EXPORT says
		"--job-name=" + JobName(t.JobID, t.Attempt),
		fmt.Sprintf("--comment=corral job %s attempt %d", t.JobID, t.Attempt),
		fmt.Sprintf("--nodes=%d", len(ranks)),
		"--nodelist=" + strings.Join(nodes, ","),
		"--ntasks-per-node=1",
		"--no-requeue",
		"--open-mode=append",
		"--output=" + logPath,
	}
	if gpus > 0 {
		args = append(args, fmt.Sprintf("--gres=gpu:%d", gpus))
	}
	if c.Partition != "" {
		args = append(args, "--partition="+c.Partition)
	}
	if c.Account != "" {
		args = append(args, "--account="+c.Account)
	}
	if t.TimeLimit > 0 {
		// Corral stops the job at its limit; Slurm's is a backstop a
		// grace and a minute later, in whole minutes.
		args = append(args, fmt.Sprintf("--time=%d", int(math.Ceil((t.TimeLimit+c.Grace+time.Minute).Minutes()))))
	}
	// SIGTERM before Slurm's own limit: to the batch shell of a one-node
	// attempt, which passes it on; to the ranks of a gang.
	sig := "B:TERM"
	if len(ranks) > 1 {
		sig = "TERM"
	}
	args = append(args, fmt.Sprintf("--signal=%s@%d", sig, max(1, int(c.Grace.Seconds()))))
	if t.Workdir != "" {
		args = append(args, "--chdir="+t.Workdir)
	}
	if t.MemMiB > 0 {
		args = append(args, fmt.Sprintf("--mem=%d", t.MemMiB))
	}
	if t.CPUs > 0 {
		args = append(args, fmt.Sprintf("--cpus-per-task=%d", int(math.Ceil(t.CPUs))))
	}
	return args
}
