package main

import (
	"cmp"
	"context"
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
	"github.com/corral-sched/corral/internal/timespec"
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

func (c *cli) newQueueCmd() *cobra.Command {
	var o queueOpts // mine.go
	cmd := &cobra.Command{
		Use:   "queue [ARRAYID]",
		Short: "List your queued and running jobs, the queue in scheduling order",
		Long: `List your jobs that have not ended: those started (scheduled, allocating,
running), then those queued, in scheduling order with each one's place in
the whole queue. -A/--all-users lists everyone's, --user U one user's, and
--state narrows to some states (--state queued: the queue alone).

A job array is one row, with its tasks' counts (queued, running,
completed, failed); --expand lists every task, and corral queue ARRAYID
lists that array's queued tasks.`,
		Example: `  corral queue              # your jobs: running, then queued
  corral queue -A -l        # everyone's, with why each queued job waits
  corral queue --state running --user ana`,
		Args: argsAtMost(1, "one array ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.runQueue(cmd.Context(), args, o) // mine.go
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func (c *cli) printQueue(w io.Writer, q api.QueueResponse, long bool) error {
	now := c.now()
	if len(q.QueuedJobs) == 0 {
		fmt.Fprintln(w, "no jobs queued")
	} else {
		headers := []string{"NUM", "POS", "ID", "USER", "PRI", "GPUS", "WAITED", "EST.START", "NAME"}
		if long {
			headers = append(headers, "REASON")
		}
		arrays := anyArrayRow(q.QueuedJobs, func(j api.QueuedJob) (string, *int) { return j.ArrayJobID, j.ArrayTaskID })
		if arrays {
			headers = append(headers, "TASKS")
		}
		t := newTable(w, headers...)
		ids := make([]string, len(q.QueuedJobs))
		for i, j := range q.QueuedJobs {
			ids[i] = j.ID
		}
		short := shortIDs(ids, shortIDMin)
		for i, j := range q.QueuedJobs {
			if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
				short[i] = j.ID // an array's row shows its whole id (arrays.go)
			}
		}
		for i, j := range q.QueuedJobs {
			waited := time.Duration(j.WaitedSeconds * float64(time.Second))
			if waited == 0 && !j.QueuedAt.IsZero() {
				waited = now.Sub(j.QueuedAt)
			}
			row := []string{numCell(j.Number, j.ArrayTaskID), strconv.Itoa(j.QueuePosition), short[i], j.User, j.Priority.String(),
				fmtGPURange(j.RequestedGPUsMin, perNodeGPUs(j.RequestedGPUs, j.Nodes), j.Nodes), fmtDuration(waited),
				queueEstStart(j, now), clip(j.Name, 32)}
			if long {
				reason := j.PendingMessage
				if reason == "" {
					reason = cmp.Or(j.PendingCause, j.PendingReason)
				}
				row = append(row, reason)
			}
			if arrays {
				cell := "-"
				if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
					cell = arrayCell(q.Arrays, j.ArrayJobID)
				}
				row = append(row, cell)
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	s := q.Statistics
	_, err := fmt.Fprintf(w, "%d queued, %d running; wait avg %s, p50 %s, p95 %s; %.1f jobs/h started\n",
		s.TotalQueued, s.TotalRunning, fmtSeconds(s.AverageWaitTime), fmtSeconds(s.WaitTimeP50),
		fmtSeconds(s.WaitTimeP95), s.QueueThroughput)
	return err
}

func (c *cli) newJobsCmd() *cobra.Command {
	var (
		state, usr, project, name, since string
		limit                            int
		expand                           bool
		pg                               jobPaging  // pages.go
		scope                            ownerScope // mine.go
	)
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List your jobs, newest first (-A: everyone's)",
		Example: `  corral jobs --state failed --since 24h
  corral jobs -A --name sweep                # everyone's jobs of that name
  corral jobs --user alice --limit 20
  corral jobs --name sweep --state running`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := client.JobFilter{State: api.State(state), User: usr, Project: project, Name: name, Limit: limit, Mine: scope.list(usr)}
			if state != "" && !f.State.Valid() {
				return usagef("--state %q: want one of %s", state, stateNames())
			}
			if limit < 0 {
				return usagef("--limit must not be negative")
			}
			if since != "" {
				t, err := parseSince(since, c.now())
				if err != nil {
					return usagef("--since: %w", err)
				}
				f.Since = t
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.JobList, error) {
				return pg.list(ctx, c, cl, f) // pages.go: --all, --cursor, --until
			}, func(w io.Writer, list api.JobList) error {
				if err := c.printJobs(w, collapseJobs(list, expand), list.Arrays); err != nil { // arrays.go
					return err
				}
				return pg.footer(w, list)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&state, "state", "", "only jobs in this state ("+stateNames()+")")
	fl.StringVar(&usr, "user", "", "only this user's jobs")
	fl.StringVar(&project, "project", "", "only this project's jobs")
	fl.StringVar(&name, "name", "", "only the jobs of this name (exactly)")
	fl.StringVar(&since, "since", "", "only jobs submitted since: an age (1h, 2d) or a time (RFC 3339, 2006-01-02)")
	fl.IntVar(&limit, "limit", 0, "at most this many jobs (a page; default: the server's, 1000)")
	pg.flags(fl)
	scope.register(fl, listAllUsage) // mine.go
	fl.BoolVar(&expand, "expand", false, "list each task of a job array on its own row (default: one row per array, with its counts)")
	return cmd
}

func (c *cli) printJobs(w io.Writer, jobs []api.Job, arrayList []api.Array) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	now := c.now()
	headers := []string{"NUM", "ID", "NAME", "USER", "STATE", "GPUS", "SUBMITTED", "RUNTIME", "EXIT"}
	arrays := anyArrayRow(jobs, func(j api.Job) (string, *int) { return j.ArrayJobID, j.ArrayTaskID })
	if arrays {
		headers = append(headers, "TASKS")
	}
	t := newTable(w, headers...)
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	short := shortIDs(ids, shortIDMin)
	for i, j := range jobs {
		if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
			short[i] = j.ID // an array's row shows its whole id (arrays.go)
		}
	}
	for i, j := range jobs {
		row := []string{numCell(j.Number, j.ArrayTaskID), short[i], clip(j.Name, 32), j.User, jobState(j), fmtJobGPUs(j),
			fmtTime(j.SubmittedAt, now), jobRuntime(j, now), exitCode(j)}
		if arrays {
			cell := "-"
			if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
				cell = arrayCell(arrayList, j.ArrayJobID)
			}
			row = append(row, cell)
		}
		t.row(row...)
	}
	return t.flush()
}

func stateNames() string {
	names := make([]string, len(api.States))
	for i, s := range api.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseSince reads an age ("90m", "2d") or a time (RFC 3339 or a date).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	d, err := timespec.Duration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an age (%s) nor a time like 2006-01-02T15:04:05Z", s, timespec.Forms)
	}
	return now.Add(-d), nil
}

func (c *cli) newLogsCmd() *cobra.Command {
	var (
		follow        bool
		attempt, rank int
		retry         time.Duration
		lw            logWindow // --tail, --since (logtail.go)
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [--tail N] [--since D] ID",
		Short: "Print a job's output",
		Long: `Print a job's output: all of it, or its last --tail N lines, or the lines
stamped since --since D (lines that begin with a time). --tail and --since
read the log from its end by byte ranges, a chunk at a time, so the tail of a
long log comes at once. -f keeps printing until the job ends; with --tail
it starts at the tail.`,
		Example: `  corral logs JOB --tail 20
  corral logs -f --tail 0 JOB     # only what comes from now on
  corral logs JOB --since 10m     # lines stamped in the last 10 minutes`,
		Args: argsExactly(1, "the job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.LogsOptions{Follow: follow, Rank: rank}
			if cmd.Flags().Changed("attempt") {
				if attempt < 0 {
					return usagef("--attempt must not be negative")
				}
				o.Attempt = &attempt
			}
			if rank < 0 {
				return usagef("--rank must not be negative")
			}
			if retry < 0 {
				return usagef("--retry must not be negative")
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("tail") {
				lw.tail = -1
			} else if lw.tail < 0 {
				return usagef("--tail must not be negative")
			}
			if lw.set() {
				j, err := cl.Job(cmd.Context(), args[0]) // the full id, for -f after
				if err != nil {
					return err
				}
				part, err := c.printLogWindow(cmd.Context(), cl, fullID(j, args[0]), o, lw)
				if err != nil || !follow {
					return err
				}
				if o.Attempt == nil {
					o.From = &part.Attempt // go on to later attempts as -f does
				}
				o.Offset = part.Size
				return c.followJob(cmd.Context(), cl, fullID(j, args[0]), o, retry)
			}
			if follow { // exits as the job did, riding out a server restart (wait.go)
				return c.logsFollow(cmd.Context(), cl, args[0], o, retry)
			}
			return cl.LogsWith(cmd.Context(), args[0], o, c.stdout)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output until the job ends, then exit with its exit code (as corral wait)")
	addRetryFlag(cmd, &retry, " with -f")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "which run of a retried job, counted from 0 like $CORRAL_ATTEMPT (0 is the first; default: the latest)")
	cmd.Flags().IntVar(&rank, "rank", 0, "which node of a multi-node gang (0 is the first)")
	cmd.Flags().IntVar(&lw.tail, "tail", 0, "print only the last N lines (with -f: then follow)")
	cmd.Flags().StringVar(&lw.since, "since", "", "print only the lines stamped since: an age (10m, 2h) or a time (RFC 3339); the log's lines must begin with a time")
	return cmd
}

func (c *cli) newPriorityCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "priority ID PRIORITY",
		Short: "Change a queued or running job's priority",
		Long: "Change the priority of a job that has not ended: a queued job's place in the queue, and for a\n" +
			"running job whether preemption may stop it for a job of higher priority. A finished job's is refused.",
		Example: "  corral priority 01JABC... high",
		Args:    argsExactly(2, "the job ID and a priority (low, normal, high, critical)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := api.ParsePriority(args[1]); err != nil {
				return usageError{err}
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Job, error) {
				return cl.SetPriority(ctx, args[0], args[1])
			}, func(w io.Writer, job api.Job) error {
				_, err := fmt.Fprintf(w, "job %s priority is now %s\n", job.ID, job.Priority)
				return err
			})
		},
	}
}
