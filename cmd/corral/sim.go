package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/daemon"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/sim"
)

// simFlags are the flags of `corral sim` and `corral sim compare`.
type simFlags struct {
	trace, format, teamsFrom, cluster             string
	policy                                        string
	backfill, preemption, spread, oldestFirst     bool
	estimates                                     string
	noiseSigma, starveShare, tailFactor, tailWait float64
	oldestBacklog, oldestStretch, starveBacklog   float64
	starveLightShare                              float64
	starveLightDrain                              time.Duration
	starveLightFloor                              time.Duration
	seed                                          uint64
	preemptGrace, minRunTime                      time.Duration
	starveAfter                                   time.Duration
	head, placement                               string
	reserveAfter                                  time.Duration
	json, timing                                  bool
	jobsOut, cpuProfile                           string
	mig                                           string // --mig LAYOUT (gpushare.go)
	shared                                        int    // --shared N: GPUs of each node shareable (MPS)
	// compare
	policies, plot string
}

func (c *cli) newSimCmd() *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim --trace FILE --cluster NODESxGPUS [--policy P] [--backfill] [--preemption]",
		Short: "Replay a job trace through the scheduler in virtual time",
		Long: `Replay a trace, in virtual time, through the same scheduling core the server
runs (ordering, quotas, gang placement, backfill, preemption), on a simulated
cluster of NODES nodes with GPUS GPUs each, and report job completion times,
queueing, makespan against its lower bound, utilization and fairness.

Traces: the Philly CSV (timestamp,duration,num_gpus,gpu_time,cluster) or JSONL,
one job per line (see docs/benchmarks.md and "go doc ./internal/sim"):
  {"id":"a1","submit":"2024-05-01T10:00:00Z","duration_s":3600,"gpus":8,"user":"ana","project":"vision"}
"submit" may also be seconds from the trace's start; optional: "estimate_s",
"priority", "cluster", "name", "command", "mig_profile" (a MIG slice, with
--mig LAYOUT; without one the job takes its GPUs whole), "gpu_share_mib" and
"gpu_compute" (an MPS share, with --shared N; without, its GPUs whole). --trace synthetic:team-week[:SEED]
replays a generated working week of a team of 15 on 16 GPUs instead (notebooks,
sweeps, 8- and 16-GPU gangs; see "go doc ./internal/sim TeamWeek"). A job
asking for more GPUs than a node has becomes a multi-node gang (16 on 8-GPU
nodes: 2 x 8). Jobs asking for more GPUs than
the cluster has are counted and left out.

Estimates given to the scheduler: exact (the true duration), noisy (times a
lognormal factor, --noise-sigma, --seed), learned (a run-time predictor fed
with the replay's own completions: the same user's runs of the same name,
command or GPU count, else the cluster's; backfill plans on the high end of
its range) or absent (the core learns each user's mean run time, else assumes
the default estimate of 1h). How good they were is reported beside the
figures: the share of jobs whose estimate was within 50% of the truth, off by
more than 2x, or missing (too little history).

--json prints one object (jobs, completed, avg_jct_s, p50/p95/p99_jct_s,
avg/p95/max_queue_s, makespan_s, makespan_lower_bound_s, makespan_arrival_bound_s
(the same bound counting only the work submitted after each moment: above
the other where the cluster idles at first for lack of work), utilization,
backlog_utilization, jain_fairness, preemptions, estimates_within_50pct,
estimates_off_2x, estimates_none, sched_cycles,
sched_cycle_p99_ms, wall_s). The last two are wall-clock measurements; with
--timing=false they are 0 and the output is the same, byte for byte, on every
run.`,
		Example: `  corral sim --trace philly.csv --cluster 64x8 --policy sjf --backfill
  corral sim --trace jobs.jsonl --cluster 4x8 --policy fair_share --preemption --json
  corral sim compare --trace philly.csv --cluster 64x8 --backfill --policies fcfs,sjf,fair_share --plot out.svg`,
		Args: argsExactly(0, "no arguments (the trace is --trace FILE)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			began := time.Now()
			jobs, cfg, stop, err := f.prepare()
			if err != nil {
				return err
			}
			defer stop()
			cfg.Policy.Name = f.policy
			out, err := sim.Run(jobs, cfg)
			if err != nil {
				return err
			}
			out.Metrics.WallS = wall(began, f.timing)
			if f.jobsOut != "" {
				if err := writeJobsOut(f.jobsOut, out.Jobs); err != nil {
					return err
				}
			}
			if f.json || c.json() {
				return writeJSON(c.stdout, out.Metrics)
			}
			return printSim(c.stdout, f, cfg, out)
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.trace, "trace", "", "trace file (Philly CSV or JSONL)")
	pf.StringVar(&f.format, "format", "", "trace format: philly or jsonl (default: from the file name, .jsonl is JSONL)")
	pf.StringVar(&f.cluster, "cluster", "", "simulated cluster, NODESxGPUS (e.g. 64x8)")
	pf.StringVar(&f.mig, "mig", "", "a MIG layout of every node's GPUs, as --simulate-gpus takes it after mig=, e.g. 0-3:1g.10gb*7,4:3g.40gb+4g.40gb: a trace's jobs with mig_profile run on those slices (80 GB GPUs)")
	pf.IntVar(&f.shared, "shared", 0, "make the first N GPUs of every node not in --mig's layout shareable (MPS): a trace's jobs with gpu_share_mib run as shares of them")
	pf.StringVar(&f.teamsFrom, "teams-from", sim.TeamsFromCluster, "what names teams (users and projects for fair share, groups for fairness): cluster, user, project or none")
	pf.BoolVar(&f.backfill, "backfill", false, "EASY backfill past the head job's reservation")
	pf.BoolVar(&f.preemption, "preemption", false, "let waiting jobs preempt lower-ranked running jobs")
	pf.BoolVar(&f.spread, "spread", false, "place on the emptiest nodes instead of best fit")
	pf.StringVar(&f.estimates, "estimates", sim.EstimatesExact, "run-time estimates given to the scheduler: exact, noisy, learned or absent")
	pf.Float64Var(&f.noiseSigma, "noise-sigma", 0.5, "sigma of the lognormal factor of noisy estimates")
	pf.Uint64Var(&f.seed, "seed", 1, "seed of the estimate noise")
	durationVar(pf, &f.preemptGrace, "preempt-grace", sim.DefaultPreemptGrace, "how long a preempted job runs on before it stops")
	durationVar(pf, &f.starveAfter, "starve-after", sched.DefaultStarveAfter, "fair_share: a job waiting this long is served before every job that has not, oldest first (0: never)")
	pf.Float64Var(&f.starveShare, "starve-share", sched.DefaultStarveShare, "fair_share: the most of the GPUs that jobs which went first for starving may hold (0 to 1)")
	pf.Float64Var(&f.tailFactor, "tail-factor", sched.DefaultTailFactor, "fair_share: a job whose estimate is at least this many times the backlog (queued and running work over every GPU) goes first, the longest first (0: never)")
	pf.BoolVar(&f.oldestFirst, "oldest-first", false, "fair_share: the oldest starving job goes first whatever the jobs that went first for starving hold (--starve-share)")
	pf.Float64Var(&f.oldestBacklog, "oldest-backlog", 0, "fair_share with --oldest-first: the oldest starving job goes first only once it has waited this many times the backlog (queued and running work over every GPU; 0: always)")
	pf.Float64Var(&f.oldestStretch, "oldest-stretch", 0, "fair_share with --oldest-first: the oldest starving job goes first only once it has waited this many times its estimate (0: always)")
	pf.Float64Var(&f.starveBacklog, "starve-backlog", sched.DefaultStarveBacklog, "fair_share: a job is starving only once it has also waited this many times the backlog (queued and running work over every GPU; 0: --starve-after alone)")
	pf.Float64Var(&f.starveLightShare, "starve-light-share", sched.DefaultStarveLightShare, "fair_share: while the queued work drains within --starve-light-drain, a job that waited --starve-after alone goes first too, while the jobs that went first for starving hold less than this share of the GPUs (0: never)")
	durationVar(pf, &f.starveLightDrain, "starve-light-drain", sched.DefaultStarveLightDrain, "fair_share: the longest drain time of the queued work (running jobs holding their GPUs meanwhile) at which --starve-light-share applies (0: never)")
	durationVar(pf, &f.starveLightFloor, "starve-light-floor", sched.DefaultStarveLightFloor, "fair_share: while --starve-light-share applies, a job starves light once it has waited --starve-after for every week the queue takes to drain, never less than this nor more than --starve-after (0: --starve-after alone)")
	pf.Float64Var(&f.tailWait, "tail-wait", sched.DefaultTailWait, "fair_share: a job goes first on the tail only once it has waited this share of its estimate (0: at once)")
	durationVar(pf, &f.reserveAfter, "reserve-after", sched.DefaultReserveAfter, "fair_share with backfill: a job holds a reservation only once it has waited this long (0: at once)")
	pf.StringVar(&f.head, "head", "walk", "fair_share with backfill: which job holds the reservation, the oldest that cannot start (oldest) or the first of the walk that does not fit (walk)")
	pf.StringVar(&f.placement, "placement", "by-end", "single-node jobs: the fullest node that fits (best-fit) or, scored by end, one whose jobs end no sooner than theirs, keeping nodes about to drain whole (by-end)")
	durationVar(pf, &f.minRunTime, "min-run-time", sched.DefaultMinRunTime, "no job is preempted sooner than this after it starts")
	pf.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	pf.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the replay to this file (go tool pprof)")
	pf.BoolVar(&f.timing, "timing", true, "measure wall time (wall_s, sched_cycle_p99_ms); false prints 0 so the output is reproducible")
	cmd.Flags().StringVar(&f.policy, "policy", sched.PolicyFairShare, "scheduling policy: "+strings.Join(sched.Policies(), ", "))
	cmd.Flags().StringVar(&f.jobsOut, "jobs-out", "", "also write every job's outcome to this file, one JSON object per line")
	cmd.AddCommand(c.newSimCompareCmd(f))
	return cmd
}

func (c *cli) newSimCompareCmd(f *simFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compare --trace FILE --cluster NODESxGPUS --policies fcfs,sjf,... [--plot FILE.svg]",
		Short: "Replay one trace under several policies and compare them (A/B)",
		Long: `Replay the same trace under each policy, with the same cluster, switches and
estimates, and print one row per policy. --plot draws, per policy, the queue
length and the utilization over time and the JCT distribution (CDF) as SVG.`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			began := time.Now()
			jobs, cfg, stop, err := f.prepare()
			if err != nil {
				return err
			}
			defer stop()
			var runs []sim.PolicyRun
			names := strings.Split(f.policies, ",")
			for _, p := range names {
				p = strings.TrimSpace(p)
				if !sched.ValidPolicy(p) {
					return usagef("--policies: %q is not a policy; choose from %s", p, strings.Join(sched.Policies(), ", "))
				}
			}
			cfg.Series = f.plot != ""
			for _, p := range names {
				at := time.Now()
				cfg.Policy.Name = strings.TrimSpace(p)
				out, err := sim.Run(jobs, cfg)
				if err != nil {
					return err
				}
				out.Metrics.WallS = wall(at, f.timing)
				runs = append(runs, sim.PolicyRun{Policy: cfg.Policy.Name, Outcome: out})
				if !f.json && !c.json() {
					fmt.Fprintf(c.stderr, "%s: done in %.1fs\n", cfg.Policy.Name, time.Since(at).Seconds())
				}
			}
			if f.plot != "" {
				if err := writePlot(f.plot, runs, f.describe(cfg)); err != nil {
					return err
				}
			}
			if f.json || c.json() {
				rows := make([]compareRow, len(runs))
				for i, r := range runs {
					rows[i] = compareRow{Policy: r.Policy, Metrics: r.Outcome.Metrics}
				}
				return writeJSON(c.stdout, rows)
			}
			if err := printCompare(c.stdout, f, cfg, runs); err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "%d policies in %.1fs\n", len(runs), time.Since(began).Seconds())
			return nil
		},
	}
	cmd.Flags().StringVar(&f.policies, "policies", strings.Join([]string{sched.PolicyFCFS, sched.PolicySJF, sched.PolicyPriority, sched.PolicyFairShare}, ","), "policies to compare, comma-separated")
	cmd.Flags().StringVar(&f.plot, "plot", "", "write an SVG of queue length, utilization and the JCT CDF per policy to this file")
	return cmd
}

type compareRow struct {
	Policy string `json:"policy"`
	sim.Metrics
}

// prepare reads the trace and the configuration, then starts the CPU
// profile if one was asked for; stop ends it.
func (f *simFlags) prepare() (jobs []sim.Job, cfg sim.Config, stop func(), err error) {
	if jobs, cfg, err = f.load(); err != nil {
		return nil, cfg, nil, err
	}
	if stop, err = f.startProfile(); err != nil {
		return nil, cfg, nil, err
	}
	return jobs, cfg, stop, nil
}

// startProfile starts the CPU profile asked for with --cpuprofile, and
// makes the garbage collector run less often than the default (a replay
// allocates short-lived snapshots at a high rate and holds little: the
// shared trace replays in about 200 MB at GOGC=400). GOGC in the
// environment wins. stop ends the profile.
func (f *simFlags) startProfile() (stop func(), err error) {
	daemon.SetControlGC()
	if f.cpuProfile == "" {
		return func() {}, nil
	}
	out, err := os.Create(f.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// load checks the flags and reads the trace.
func (f *simFlags) load() ([]sim.Job, sim.Config, error) {
	var cfg sim.Config
	if f.trace == "" {
		return nil, cfg, usagef("--trace FILE is required")
	}
	if f.cluster == "" {
		return nil, cfg, usagef("--cluster NODESxGPUS is required (e.g. --cluster 64x8)")
	}
	nodes, gpus, err := parseCluster(f.cluster)
	if err != nil {
		return nil, cfg, usagef("--cluster: %w", err)
	}
	switch f.format {
	case "", sim.FormatPhilly, sim.FormatJSONL:
	default:
		return nil, cfg, usagef("--format %q: want philly or jsonl", f.format)
	}
	switch f.teamsFrom {
	case sim.TeamsFromCluster, sim.TeamsFromUser, sim.TeamsFromProject, sim.TeamsFromNone:
	default:
		return nil, cfg, usagef("--teams-from %q: want cluster, user, project or none", f.teamsFrom)
	}
	switch f.estimates {
	case sim.EstimatesExact, sim.EstimatesNoisy, sim.EstimatesLearned, sim.EstimatesAbsent:
	default:
		return nil, cfg, usagef("--estimates %q: want exact, noisy, learned or absent", f.estimates)
	}
	if f.policy != "" && !sched.ValidPolicy(f.policy) {
		return nil, cfg, usagef("--policy %q: choose from %s", f.policy, strings.Join(sched.Policies(), ", "))
	}
	if f.noiseSigma <= 0 || f.noiseSigma > 5 || math.IsNaN(f.noiseSigma) {
		return nil, cfg, usagef("--noise-sigma must be above 0 and at most 5")
	}
	if !(f.starveShare > 0 && f.starveShare <= 1) {
		return nil, cfg, usagef("--starve-share must be above 0 and at most 1")
	}
	if f.tailFactor < 0 || math.IsNaN(f.tailFactor) || math.IsInf(f.tailFactor, 0) {
		return nil, cfg, usagef("--tail-factor must be 0 (never) or above")
	}
	if f.tailWait < 0 || math.IsNaN(f.tailWait) || math.IsInf(f.tailWait, 0) {
		return nil, cfg, usagef("--tail-wait must be 0 (at once) or above")
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"--oldest-backlog", f.oldestBacklog}, {"--oldest-stretch", f.oldestStretch}, {"--starve-backlog", f.starveBacklog}, {"--starve-light-share", f.starveLightShare}} {
		if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return nil, cfg, usagef("%s must be 0 or above", v.name)
		}
	}
	if f.placement != "by-end" && f.placement != "best-fit" {
		return nil, cfg, usagef("--placement %q: want by-end or best-fit", f.placement)
	}
	if f.head != "oldest" && f.head != "walk" {
		return nil, cfg, usagef("--head %q: want oldest or walk", f.head)
	}
	if f.preemptGrace < 0 || f.minRunTime < 0 || f.starveAfter < 0 || f.reserveAfter < 0 || f.starveLightDrain < 0 || f.starveLightFloor < 0 {
		return nil, cfg, usagef("--preempt-grace, --min-run-time, --starve-after, --starve-light-drain, --starve-light-floor and --reserve-after cannot be negative")
	}
	jobs, err := readTrace(f.trace, f.format, f.teamsFrom)
	if err != nil {
		return nil, cfg, err
	}
	grace := f.preemptGrace
	if grace == 0 {
		grace = -1 // zero means none, not the default
	}
	cfg = sim.Config{Nodes: nodes, NodeGPUs: gpus, Estimates: f.estimates, NoiseSigma: f.noiseSigma, Seed: f.seed,
		PreemptGrace: grace, Timing: f.timing,
		Policy: sched.Policy{Backfill: f.backfill, Preemption: f.preemption, Spread: f.spread, MinRunTime: f.minRunTime,
			StarveAfter: f.starveAfter, OldestHead: f.head == "oldest", ReserveAfter: f.reserveAfter, StarveShare: f.starveShare,
			PlainBestFit: f.placement == "best-fit"}}
	if f.reserveAfter == 0 {
		cfg.Policy.ReserveAfter = -1
	}
	if f.starveAfter == 0 {
		cfg.Policy.StarveAfter = -1 // zero means never, not the default
	}
	cfg.Policy.TailFactor, cfg.Policy.TailWait, cfg.Policy.OldestFirst = f.tailFactor, f.tailWait, f.oldestFirst
	cfg.Policy.OldestBacklog, cfg.Policy.OldestStretch, cfg.Policy.StarveBacklog = f.oldestBacklog, f.oldestStretch, f.starveBacklog
	cfg.Policy.StarveLightShare, cfg.Policy.StarveLightDrain = f.starveLightShare, f.starveLightDrain
	cfg.Policy.StarveLightFloor = f.starveLightFloor
	if f.starveLightFloor == 0 {
		cfg.Policy.StarveLightFloor = -1 // zero means --starve-after alone, not the default
	}
	if f.starveLightShare == 0 || f.starveLightDrain == 0 {
		cfg.Policy.StarveLightShare = -1 // zero means never, not the default
	}
	if f.starveBacklog == 0 {
		cfg.Policy.StarveBacklog = -1 // zero means --starve-after alone, not the default
	}
	if f.tailWait == 0 {
		cfg.Policy.TailWait = -1
	}
	if f.tailFactor == 0 {
		cfg.Policy.TailFactor = -1
	}
	if cfg.MIG, err = simMIGLayout(f.mig, gpus); err != nil { // gpushare.go
		return nil, cfg, err
	}
	if f.shared < 0 || f.shared > gpus-len(cfg.MIG) {
		return nil, cfg, usagef("--shared: %d GPUs of each node; the nodes have %d not in MIG mode", f.shared, gpus-len(cfg.MIG))
	}
	cfg.Shared = f.shared
	return jobs, cfg, nil
}

// syntheticTeam names the synthetic team trace (sim.TeamWeek) as a
// --trace: synthetic:team-week, or synthetic:team-week:SEED.
const syntheticTeam = "synthetic:team-week"

// readTrace reads the trace file, or generates the synthetic one it names.
func readTrace(name, format, teamsFrom string) ([]sim.Job, error) {
	rest, ok := strings.CutPrefix(name, syntheticTeam)
	if !ok {
		return sim.ReadFile(name, format, teamsFrom)
	}
	seed := uint64(1)
	if rest != "" {
		n, err := strconv.ParseUint(strings.TrimPrefix(rest, ":"), 10, 64)
		if err != nil || !strings.HasPrefix(rest, ":") {
			return nil, usagef("--trace %s: want %s or %s:SEED", name, syntheticTeam, syntheticTeam)
		}
		seed = n
	}
	jobs := sim.TeamWeek(seed)
	for i := range jobs {
		switch teamsFrom {
		case sim.TeamsFromUser:
			jobs[i].Team = jobs[i].User
		case sim.TeamsFromNone:
			jobs[i].Team = "default"
		}
	}
	return jobs, nil
}

// parseCluster reads NODESxGPUS.
func parseCluster(s string) (nodes, gpus int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want NODESxGPUS, e.g. 64x8", s)
	}
	nodes, err1 := strconv.Atoi(a)
	gpus, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || nodes < 1 || gpus < 1 || nodes > 100000 || gpus > 1024 {
		return 0, 0, fmt.Errorf("%q: want NODESxGPUS with 1 to 100000 nodes of 1 to 1024 GPUs", s)
	}
	return nodes, gpus, nil
}

// describe is the run's setup in one line.
func (f *simFlags) describe(cfg sim.Config) string {
	sw := []string{}
	if f.backfill {
		sw = append(sw, "backfill")
	}
	if f.preemption {
		sw = append(sw, "preemption")
	}
	if len(sw) == 0 {
		sw = append(sw, "no backfill, no preemption")
	}
	est := f.estimates
	if est == sim.EstimatesNoisy {
		est = fmt.Sprintf("noisy (sigma %g, seed %d)", f.noiseSigma, f.seed)
	}
	return fmt.Sprintf("%s on %dx%d GPUs, %s, estimates %s", f.trace, cfg.Nodes, cfg.NodeGPUs, strings.Join(sw, ", "), est)
}

func wall(began time.Time, timing bool) float64 {
	if !timing {
		return 0
	}
	return math.Round(time.Since(began).Seconds()*1000) / 1000
}

func printSim(w io.Writer, f *simFlags, cfg sim.Config, out *sim.Outcome) error {
	m := out.Metrics
	fmt.Fprintf(w, "%s, policy %s\n", f.describe(cfg), f.policy)
	t := newTable(w)
	t.row("jobs", fmt.Sprintf("%d (%d completed, %d never fit the cluster)", m.Jobs, m.Completed, out.Unsatisfiable))
	t.row("JCT", fmt.Sprintf("avg %s  p50 %s  p95 %s  p99 %s", secs(m.AvgJCT), secs(m.P50JCT), secs(m.P95JCT), secs(m.P99JCT)))
	t.row("queued", fmt.Sprintf("avg %s  p95 %s  max %s", secs(m.AvgQueue), secs(m.P95Queue), secs(m.MaxQueue)))
	ratio := 0.0
	if m.MakespanLowerBound > 0 {
		ratio = m.Makespan / m.MakespanLowerBound
	}
	t.row("makespan", fmt.Sprintf("%s (lower bound %s, x%.3f)", secs(m.Makespan), secs(m.MakespanLowerBound), ratio))
	if m.MakespanArrivalBound > m.MakespanLowerBound {
		t.row("", fmt.Sprintf("(bound by arrivals %s, x%.3f)", secs(m.MakespanArrivalBound), m.Makespan/m.MakespanArrivalBound))
	}
	t.row("utilization", fmt.Sprintf("%.2f%% (%.2f%% while jobs waited)", 100*m.Utilization, 100*m.BacklogUtilization))
	t.row("fairness", fmt.Sprintf("Jain %.4f over teams' mean slowdowns", m.JainFairness))
	t.row("preemptions", strconv.Itoa(m.Preemptions))
	t.row("estimates", fmt.Sprintf("%.1f%% within ±50%%, %.1f%% off by more than 2x, %.1f%% none", 100*m.EstimatesWithin50, 100*m.EstimatesOff2x, 100*m.EstimatesNone))
	t.row("cycles", fmt.Sprintf("%d (p99 %.3f ms)", m.SchedCycles, m.SchedCycleP99Ms))
	t.row("wall", fmt.Sprintf("%.2fs", m.WallS))
	return t.flush()
}

func printCompare(w io.Writer, f *simFlags, cfg sim.Config, runs []sim.PolicyRun) error {
	fmt.Fprintln(w, f.describe(cfg))
	t := newTable(w, "POLICY", "DONE", "AVG_JCT", "P50_JCT", "P95_JCT", "P99_JCT", "AVG_QUEUE", "P95_QUEUE", "MAKESPAN/LB", "UTIL", "BACKLOG_UTIL", "JAIN", "PREEMPT", "CYCLES", "P99_CYCLE", "WALL")
	var base float64
	for _, r := range runs {
		if r.Policy == sched.PolicyFCFS {
			base = r.Outcome.Metrics.AvgJCT
		}
	}
	for _, r := range runs {
		m := r.Outcome.Metrics
		jct := secs(m.AvgJCT)
		if base > 0 {
			jct += fmt.Sprintf(" (x%.2f)", m.AvgJCT/base)
		}
		ratio := 0.0
		if m.MakespanLowerBound > 0 {
			ratio = m.Makespan / m.MakespanLowerBound
		}
		t.row(r.Policy, fmt.Sprintf("%d/%d", m.Completed, m.Jobs), jct, secs(m.P50JCT), secs(m.P95JCT), secs(m.P99JCT),
			secs(m.AvgQueue), secs(m.P95Queue), fmt.Sprintf("%.3f", ratio), fmt.Sprintf("%.2f%%", 100*m.Utilization),
			fmt.Sprintf("%.2f%%", 100*m.BacklogUtilization), fmt.Sprintf("%.3f", m.JainFairness), strconv.Itoa(m.Preemptions),
			strconv.Itoa(m.SchedCycles), fmt.Sprintf("%.2fms", m.SchedCycleP99Ms), fmt.Sprintf("%.1fs", m.WallS))
	}
	return t.flush()
}

// secs formats seconds for people: 42s, 3m20s, 5h02m, 3d04h.
func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", s)
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// jobLine is one line of --jobs-out.
type jobLine struct {
	ID          string  `json:"id"`
	Team        string  `json:"team"`
	GPUs        int     `json:"gpus"`
	Submit      string  `json:"submit"`
	DurationS   float64 `json:"duration_s"`
	Completed   bool    `json:"completed"`
	StartS      float64 `json:"first_start_s"` // from submission
	JCTS        float64 `json:"jct_s"`
	QueuedS     float64 `json:"queued_s"`
	Preemptions int     `json:"preemptions"`
}

func writeJobsOut(path string, jobs []sim.JobOutcome) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, j := range jobs {
			l := jobLine{ID: j.ID, Team: j.Team, GPUs: j.GPUs, Submit: j.Submit.Format(time.RFC3339), DurationS: j.Duration.Seconds(),
				Completed: j.Completed, QueuedS: j.Queued.Seconds(), Preemptions: j.Preemptions}
			if !j.FirstStart.IsZero() {
				l.StartS = j.FirstStart.Sub(j.Submit).Seconds()
			}
			if j.Completed {
				l.JCTS = j.End.Sub(j.Submit).Seconds()
			}
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	})
}

func writePlot(path string, runs []sim.PolicyRun, title string) error {
	return writeFile(path, func(w io.Writer) error { return sim.WriteSVG(w, runs, title) })
}

// writeFile creates path and has write fill it through a buffer; an error
// of any step is returned.
func writeFile(path string, write func(w io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(fh)
	if err := write(w); err != nil {
		fh.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
