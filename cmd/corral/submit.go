package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/lazyre"
)

// submitFlags are the flags of corral submit.
type submitFlags struct {
	gpus, nodes, maxRetries     int
	gpuMem                      float64
	gpuType, priority, duration string
	name, project, user         string
	workdir, idempotencyKey     string
	preemptGrace, timeLimit     string
	labels                      []string
	envf                        envFlags      // --export, --env, --env-file (envflags.go)
	mem                         string        // --mem, e.g. 64G
	cpus                        float64       // --cpus
	array                       string        // --array, e.g. 0-99%8
	wait                        bool          // --wait (submit only)
	retry                       time.Duration // --retry (submit --wait only)
	after                       string        // --after / --dependency (depend.go)
	elastic                     elasticFlags  // --gpus MIN-MAX, --elastic-wait (elastic.go)
	part                        partFlags     // --mig, --gpu-share, --gpu-compute (gpushare.go)

	notify      string // --notify begin,end,fail,preempt|all|none
	notifyTasks bool   // --notify-tasks
	class       string // --class (docs/interactive.md)
	reservation string // --reservation (docs/bookings-scheduling.md)
	pool        string // --pool (docs/pools.md)

	image imageFlags // --image, --mount (imageflags.go)

	slurm slurmOpts // -o/-e, --begin, --signal, --json, a batch script (script.go)
}

func (c *cli) newSubmitCmd() *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit [flags] (SCRIPT [ARG...] | -- CMD [ARG...])",
		Short: "Queue a job",
		Long: `Queue a job. The command runs with bash -c (sh -c where the node has no
bash) on the node that gets it, in --workdir (default: the current
directory), with your environment (--export ALL; see docs/jobs.md) and
CUDA_VISIBLE_DEVICES set to its GPUs.

A single CMD argument is the shell command verbatim, so quote it to keep
variables for the job's shell: corral submit -- 'echo $CUDA_VISIBLE_DEVICES'.
Several arguments are joined with shell quoting, so they run as given.

A file as the first argument (not after --) is a batch script, as sbatch
takes it: its contents are copied now, it runs by its own #! line with
ARGs, and its header lines "#CORRAL <flags>" and "#SBATCH <options>" are
read as flags (the command line wins; #CORRAL wins over #SBATCH; #SBATCH
options Corral does not share are named in a warning). See docs/jobs.md.`,
		Example: `  corral submit --gpus 2 -t 2:00:00 --estimate 1h -- python train.py --lr 3e-4
  corral submit train.sh --lr 3e-4          # a batch script: #SBATCH/#CORRAL headers
  corral submit -J sweep -o 'out-%j.log' -t 30 -- ./sweep.sh   # -t 30: 30 minutes
  corral submit --gpus 8 --nodes 2 --priority high --name big -- ./launch.sh
  corral submit --gpus 4-8 --elastic-wait 10m -- ./train.sh   # 4 to 8 GPUs; $CORRAL_NUM_GPUS says how many
  corral submit -- 'nvidia-smi -L; echo $CUDA_VISIBLE_DEVICES'`,
		Args: needCommand("corral submit --gpus 1 -- python train.py"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, job, err := c.submit(cmd, &f, args)
			if err != nil {
				return err
			}
			if job.ArrayJobID != "" { // arrays.go
				if _, err := c.arraySubmitted(cmd.Context(), cl, job); err != nil || !f.wait {
					return err
				}
				return c.arrayWait(cmd.Context(), cl, job.ArrayJobID, f.retry)
			}
			err = c.emit(job, func(w io.Writer) error {
				detail := numberNote(job.Number) + string(job.State) // numbers.go
				if job.QueuePosition > 0 {
					detail += ", position " + strconv.Itoa(job.QueuePosition)
				}
				_, err := fmt.Fprintf(w, "submitted job %s (%s)\n", job.ID, detail)
				return err
			})
			if err != nil || !f.wait {
				return err
			}
			return c.submitWait(cmd.Context(), cl, job.ID, f.retry)
		},
	}
	f.register(cmd)
	addRetryFlag(cmd, &f.retry, " with --wait")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait until the job ends, then exit with its exit code (as corral wait)")
	return cmd
}

// needCommand refuses a submit (or run) without a command, showing
// example.
func needCommand(example string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usagef("missing the command to run, e.g. %s", example)
		}
		return nil
	}
}

// submit submits the job that f and args describe (corral submit, corral
// run) and returns the client it used and the job as queued.
func (c *cli) submit(cmd *cobra.Command, f *submitFlags, args []string) (*client.Client, api.Job, error) {
	if err := c.prepareSlurm(cmd, f, args); err != nil { // script.go: --json, a batch script, --begin
		return nil, api.Job{}, err
	}
	req, err := f.request(cmd, args)
	if err != nil {
		return nil, api.Job{}, err
	}
	cl, err := c.client()
	if err != nil {
		return nil, api.Job{}, err
	}
	key := f.idempotencyKey
	if key == "" && len(cl.Servers()) > 1 {
		// Several servers: a submission whose connection broke is sent
		// to the next one, and the key makes that safe (servers.go).
		key = "cli-" + randomHex(16) // benchfailover.go
	}
	job, err := cl.Submit(cmd.Context(), req, key)
	return cl, job, err
}

// register adds the flags of corral submit (and corral run) to cmd.
func (f *submitFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags after CMD belong to CMD
	fl.VarP(gpusValue{min: &f.elastic.min, max: &f.gpus}, "gpus", "G", "GPUs per node (default: the server's), or an elastic range MIN-MAX such as 4-8: the job starts with as many as fit, never fewer than MIN ($CORRAL_NUM_GPUS says how many)")
	fl.StringVar(&f.elastic.wait, "elastic-wait", "", "with --gpus MIN-MAX: wait this long (from submission) for MAX GPUs before taking fewer, e.g. 10m (default 0: take what fits at once)")
	fl.Float64Var(&f.gpuMem, "gpu-mem", 0, "minimum free memory per GPU, in GB")
	fl.StringVar(&f.gpuType, "gpu-type", "", "GPU model, e.g. H100")
	f.part.register(fl) // gpushare.go
	fl.IntVarP(&f.nodes, "nodes", "N", 0, "nodes for a multi-node gang (--gpus on each)")
	fl.StringVar(&f.priority, "priority", "", "low, normal, high or critical (or 1-4)")
	fl.StringVar(&f.duration, "estimate", "", "estimated run time, e.g. 2h or 90m (helps backfill); the forms of --time")
	fl.StringVarP(&f.timeLimit, "time", "t", "", "time limit, Slurm's forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (a bare number is minutes), or 90s, 4h, 2d: past it the job is stopped (reason time_limit); default: the server's --max-run-time")
	fl.StringVar(&f.timeLimit, "time-limit", "", "the same as -t/--time (a bare number is minutes)")
	fl.StringVarP(&f.name, "job-name", "J", "", "job name (as --name)")
	fl.StringVar(&f.name, "name", "", "job name")
	fl.StringVar(&f.project, "project", "", "project the job counts against")
	fl.StringVar(&f.user, "user", "", "job owner (default: the token's user; only admin tokens may name another)")
	f.envf.register(fl)
	fl.StringVar(&f.workdir, "workdir", "", "working directory of the job (default: the current directory)")
	fl.StringVarP(&f.workdir, "chdir", "D", "", "the same as --workdir")
	fl.IntVar(&f.maxRetries, "max-retries", 0, "times to requeue the job after a lost node or preemption")
	fl.StringVar(&f.idempotencyKey, "idempotency-key", "", "submitting again with the same key returns the first job")
	fl.StringVar(&f.preemptGrace, "preempt-grace", "", "time to checkpoint when preempted, between SIGTERM and SIGKILL (default: the policy's, 30s)")
	fl.StringArrayVar(&f.labels, "label", nil, "run only on nodes with label K=V (repeatable)")
	fl.StringVar(&f.mem, "mem", "", "memory limit of the job (of each node's part), e.g. 64G or 512M; past it the job fails out_of_memory (default: the node's --default-mem-per-gpu times its GPUs)")
	fl.StringVar(&f.array, "array", "", "submit a job array, Slurm's grammar: 0-99, 0-99:4, 1,5,9-12; %N runs at most N tasks at once (0-999%16)")
	fl.Float64VarP(&f.cpus, "cpus", "c", 0, "CPU limit of the job (of each node's part), in CPUs, e.g. 8 or 0.5 (default: the node's --default-cpus-per-gpu times its GPUs)")
	registerDependFlags(fl, &f.after)
	fl.StringVar(&f.notify, "notify", "", "which notifications the job sends to your endpoints (corral notify): begin,end,fail,preempt, all or none (default: fail and preempt, and end when it ran over 10m)")
	fl.StringVar(&f.class, "class", "", "batch (the default: preemptible by policy), preemptible (batch that may also run on GPUs booked ahead until the booking starts), interactive (never preempted; must fit within quotas) or interactive-preemptible (may borrow idle GPUs; preemptible)")
	fl.StringVar(&f.reservation, "reservation", "", "run in this booking (corral reserve): on its GPUs, in its window; you must be one of its users")
	fl.StringVar(&f.pool, "pool", "", "run on this pool's nodes only: agents, ray or slurm, as the server drives them (default: any)")
	f.image.register(fl)
	fl.BoolVar(&f.notifyTasks, "notify-tasks", false, "an array's tasks notify one by one (default: one summary when the array ends, failures as digests)")
	f.slurm.register(fl) // script.go
}

// request builds the submit body from the flags and the command arguments.
func (f *submitFlags) request(cmd *cobra.Command, args []string) (api.SubmitRequest, error) {
	req := api.SubmitRequest{
		Name:        f.name,
		User:        f.user,
		Project:     f.project,
		Command:     f.slurm.command(args), // script.go: a script's arguments, else the command
		GPUMemoryGB: f.gpuMem,
		GPUType:     f.gpuType,
		Nodes:       f.nodes,
		MaxRetries:  f.maxRetries,
		DependsOn:   f.after,
		Array:       f.array,
		Pool:        f.pool,
	}
	if strings.TrimSpace(req.Command) == "" && f.slurm.script == "" {
		return req, usagef("the command to run is empty")
	}
	if err := f.slurm.apply(&req); err != nil { // script.go
		return req, err
	}
	if _, err := api.ParseNotify(f.notify); err != nil {
		return req, usagef("--notify: %w", err)
	}
	req.Notify, req.NotifyTasks = f.notify, f.notifyTasks
	req.Reservation = strings.TrimSpace(f.reservation)
	switch f.class {
	case "", api.ClassBatch, api.ClassPreemptible, api.ClassInteractive, api.ClassInteractivePreemptible:
		req.Class = f.class
	default:
		return req, usagef("--class %q: want batch, preemptible, interactive or interactive-preemptible", f.class)
	}
	if f.retry < 0 {
		return req, usagef("--retry must not be negative")
	}
	if cmd.Flags().Changed("gpus") {
		gpus := f.gpus
		req.GPUCount = &gpus
	}
	if err := f.elastic.apply(&req); err != nil {
		return req, err
	}
	if err := f.part.apply(&req.GPUPart); err != nil { // gpushare.go
		return req, err
	}
	if err := f.image.apply(&req); err != nil {
		return req, err
	}
	if f.priority != "" {
		req.Priority = rawString(f.priority)
	}
	if f.duration != "" {
		d, err := normLimit("--estimate", f.duration) // durflag.go
		if err != nil {
			return req, err
		}
		req.EstimatedDuration, req.EstimateFrom = rawString(d), f.slurm.from(cmd, "estimate")
	}
	if f.timeLimit != "" {
		d, err := normLimit("-t/--time", f.timeLimit)
		if err != nil {
			return req, err
		}
		req.TimeLimit, req.TimeLimitFrom = rawString(d), f.slurm.from(cmd, "time")
	}
	if f.preemptGrace != "" {
		d, err := normDuration("--preempt-grace", f.preemptGrace)
		if err != nil {
			return req, err
		}
		req.PreemptGrace = rawString(d)
	}
	if f.mem != "" {
		mib, err := parseMemMiB(f.mem)
		if err != nil {
			return req, usagef("--mem: %v", err)
		}
		req.MemMiB = &mib
	}
	if cmd.Flags().Changed("cpus") {
		cpus := f.cpus
		req.CPUs = &cpus
	}
	env, err := f.envf.build(os.Environ(), cmd.ErrOrStderr())
	if err != nil {
		return req, err
	}
	req.Env = env
	if req.NodeLabels, err = cmdkit.ParseEnv("--label", f.labels); err != nil {
		return req, err
	}
	wd := f.workdir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return req, fmt.Errorf("finding the current directory for --workdir: %w", err)
		}
	} else if wd, err = filepath.Abs(wd); err != nil {
		return req, usagef("--workdir: %w", err)
	}
	req.Workdir = wd
	return req, nil
}

// rawString encodes s as a JSON string.
func rawString(s string) api.RawValue {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// shellSafe matches words the shell reads as themselves.
var shellSafe = lazyre.New(`^[A-Za-z0-9_@%+=:,./-]+$`)

// joinCommand makes one shell command of args: a single argument is the
// command verbatim; several are each quoted when the shell would otherwise
// change them.
func joinCommand(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for /bin/sh when needed.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
