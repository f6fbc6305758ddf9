package sim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/sched"
)

func jsonl(t *testing.T, lines ...string) []Job {
	t.Helper()
	jobs, err := ReadJSONL(strings.NewReader(strings.Join(lines, "\n")), TeamsFromUser)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func run(t *testing.T, jobs []Job, nodes, gpus int, p sched.Policy) *Outcome {
	t.Helper()
	out, err := Run(jobs, Config{Nodes: nodes, NodeGPUs: gpus, Policy: p, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// starts maps job id -> start time in seconds from the first submission.
func starts(out *Outcome) map[string]float64 {
	m := map[string]float64{}
	for _, d := range out.Decisions {
		if d.Kind == "start" {
			m[d.JobID] = d.At.Sub(jsonlEpoch).Seconds()
		}
	}
	return m
}

// Metrics worked out by hand. One 4-GPU node, fcfs, no backfill: a holds
// every GPU for 0-100; b and c both fit at 100 and start together.
func TestHandWorkedFCFS(t *testing.T) {
	jobs := jsonl(t,
		`{"id":"a","submit":0,"duration_s":100,"gpus":4,"user":"x"}`,
		`{"id":"b","submit":10,"duration_s":50,"gpus":2,"user":"x"}`,
		`{"id":"c","submit":20,"duration_s":30,"gpus":2,"user":"x"}`)
	out := run(t, jobs, 1, 4, sched.Policy{Name: sched.PolicyFCFS})
	if got, want := starts(out), map[string]float64{"a": 0, "b": 100, "c": 100}; !reflect.DeepEqual(got, want) {
		t.Fatalf("starts %v, want %v", got, want)
	}
	m := out.Metrics.WithoutTiming()
	want := Metrics{Jobs: 3, Completed: 3,
		AvgJCT: 116.667, P50JCT: 110, P95JCT: 140, P99JCT: 140, // JCTs 100, 140, 110
		AvgQueue: 56.667, P95Queue: 90, MaxQueue: 90, // queued 0, 90, 80
		Makespan:             150,
		MakespanLowerBound:   140,     // (400+100+60) GPU-s / 4 GPUs beats the latest ideal end (100)
		MakespanArrivalBound: 140,     // the work from 10 on needs 10+40, from 20 on 20+15: less
		Utilization:          0.93333, // 560 / (4 x 150)
		BacklogUtilization:   1,       // jobs waited during 10-100, with all 4 GPUs busy
		JainFairness:         1,       // one team
		EstimatesWithin50:    1,       // exact
		SchedCycles:          2,       // at 0 and 100 (at 10 and 20 nothing could start: skipped)
	}
	if m != want {
		t.Fatalf("metrics\n got %+v\nwant %+v", m, want)
	}
}

// The bound by arrivals: a runs alone on the idle node for 0-10, then b
// and c, submitted at 100, need the node until 200 whatever the order:
// the work from 100 on (400 GPU-s over 2 GPUs) ends at 200 at the
// earliest, past the total work's bound (210/2) and the latest ideal end
// (150).
func TestHandWorkedArrivalBound(t *testing.T) {
	jobs := jsonl(t,
		`{"id":"a","submit":0,"duration_s":10,"gpus":1,"user":"x"}`,
		`{"id":"b","submit":100,"duration_s":50,"gpus":2,"user":"x"}`,
		`{"id":"c","submit":100,"duration_s":50,"gpus":2,"user":"x"}`)
	m := run(t, jobs, 1, 2, sched.Policy{Name: sched.PolicyFCFS}).Metrics
	if m.Makespan != 200 || m.MakespanLowerBound != 150 || m.MakespanArrivalBound != 200 {
		t.Fatalf("makespan %v, lower bound %v, bound by arrivals %v; want 200, 150, 200", m.Makespan, m.MakespanLowerBound, m.MakespanArrivalBound)
	}
}

// Backfill: c fits beside a and ends (52) before b's reservation (100), so
// it goes first; without backfill it waits for b.
func TestHandWorkedBackfill(t *testing.T) {
	jobs := jsonl(t,
		`{"id":"a","submit":0,"duration_s":100,"gpus":2,"user":"x"}`,
		`{"id":"b","submit":1,"duration_s":10,"gpus":4,"user":"x"}`,
		`{"id":"c","submit":2,"duration_s":50,"gpus":2,"user":"x"}`)
	for _, tc := range []struct {
		backfill bool
		starts   map[string]float64
		avgJCT   float64
		backlog  float64
	}{
		// JCTs 100, 109, 50; waiting during 1-100 with 4 GPUs busy 2-52, 2 otherwise: (2x1 + 4x50 + 2x48) / (4 x 99)
		{true, map[string]float64{"a": 0, "b": 100, "c": 2}, 86.333, 0.75253},
		// JCTs 100, 109, 158; waiting during 1-110: (2 x 99 + 4 x 10) / (4 x 109)
		{false, map[string]float64{"a": 0, "b": 100, "c": 110}, 122.333, 0.54587},
	} {
		out := run(t, jobs, 1, 4, sched.Policy{Name: sched.PolicyFCFS, Backfill: tc.backfill})
		if got := starts(out); !reflect.DeepEqual(got, tc.starts) {
			t.Errorf("backfill %v: starts %v, want %v", tc.backfill, got, tc.starts)
		}
		if m := out.Metrics; m.AvgJCT != tc.avgJCT || m.BacklogUtilization != tc.backlog {
			t.Errorf("backfill %v: avg JCT %v, backlog utilization %v; want %v, %v", tc.backfill, m.AvgJCT, m.BacklogUtilization, tc.avgJCT, tc.backlog)
		}
	}
}

// Jain's index over teams' mean slowdowns: on one GPU, x's job runs first
// (slowdown 1) and y's waits for it (JCT 200 for 100s of work: 2).
// (1+2)^2 / (2 x (1+4)) = 0.9.
func TestHandWorkedJain(t *testing.T) {
	jobs := jsonl(t,
		`{"id":"x1","submit":0,"duration_s":100,"gpus":1,"user":"x"}`,
		`{"id":"y1","submit":0,"duration_s":100,"gpus":1,"user":"y"}`)
	out := run(t, jobs, 1, 1, sched.Policy{Name: sched.PolicyFCFS})
	if got := out.Metrics.JainFairness; got != 0.9 {
		t.Fatalf("jain %v, want 0.9", got)
	}
}

// Preemption: a high-priority job preempts a low one once its 10-minute
// protection is over; the victim stops after its 30s grace, requeues and
// starts over when the high job ends.
func TestHandWorkedPreemption(t *testing.T) {
	jobs := jsonl(t,
		`{"id":"low","submit":0,"duration_s":1000,"gpus":1,"user":"x","priority":"low"}`,
		`{"id":"high","submit":700,"duration_s":100,"gpus":1,"user":"y","priority":"high"}`)
	out := run(t, jobs, 1, 1, sched.Policy{Name: sched.PolicyPriority, Preemption: true, Backfill: true})
	var got []string
	for _, d := range out.Decisions {
		got = append(got, fmt.Sprintf("%s %s %.0f", d.Kind, d.JobID, d.At.Sub(jsonlEpoch).Seconds()))
	}
	want := []string{"start low 0", "preempt low 700", "start high 730", "start low 830"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions %q, want %q", got, want)
	}
	m := out.Metrics
	if m.Preemptions != 1 || m.Makespan != 1830 || m.MaxQueue != 100 {
		t.Fatalf("preemptions %d, makespan %v, max queue %v; want 1, 1830, 100", m.Preemptions, m.Makespan, m.MaxQueue)
	}
}

// A job bigger than a node becomes a gang spread evenly over nodes; one
// bigger than the cluster never runs.
func TestGangs(t *testing.T) {
	for _, tc := range []struct{ gpus, node, per, nodes int }{
		{1, 8, 1, 1}, {8, 8, 8, 1}, {16, 8, 8, 2}, {12, 8, 6, 2}, {24, 8, 8, 3}, {13, 8, 1, 13},
	} {
		if per, n := Gang(tc.gpus, tc.node); per != tc.per || n != tc.nodes {
			t.Errorf("Gang(%d, %d) = %d x %d, want %d x %d", tc.gpus, tc.node, n, per, tc.nodes, tc.per)
		}
	}
	jobs := jsonl(t,
		`{"id":"g","submit":0,"duration_s":10,"gpus":8,"user":"x"}`,
		`{"id":"huge","submit":0,"duration_s":10,"gpus":9,"user":"x"}`)
	out := run(t, jobs, 2, 4, sched.Policy{Name: sched.PolicyFCFS})
	if len(out.Decisions) != 1 || len(out.Decisions[0].Placements) != 2 || out.Unsatisfiable != 1 || out.Metrics.Completed != 1 {
		t.Fatalf("decisions %+v, unsatisfiable %d", out.Decisions, out.Unsatisfiable)
	}
}

// randomTrace is a bursty trace of mostly small jobs with a few gangs,
// from a few teams, some with estimates of their own.
func randomTrace(seed uint64, n int) []Job {
	r := rand.New(rand.NewPCG(seed, 1))
	sizes := []int{1, 1, 1, 1, 1, 1, 2, 4, 8, 16}
	at := jsonlEpoch
	jobs := make([]Job, n)
	for i := range jobs {
		if r.IntN(4) > 0 {
			at = at.Add(time.Duration(r.IntN(300)) * time.Second)
		}
		team := fmt.Sprintf("t%d", r.IntN(4))
		jobs[i] = Job{ID: fmt.Sprint(i), Submit: at, Duration: time.Duration(1+r.ExpFloat64()*1800) * time.Second,
			GPUs: sizes[r.IntN(len(sizes))], User: team, Project: team, Team: team, Priority: 1 + r.IntN(3)}
	}
	return jobs
}

// The windowed cycles decide exactly what cycles over the whole queue do,
// with and without backfill and preemption.
func TestWindowedIsExact(t *testing.T) {
	for seed := range uint64(6) {
		jobs := randomTrace(seed, 500)
		// Mixed priorities with preemption under every policy: a job
		// preempts only jobs that would be served after it once requeued,
		// so none thrashes (a thrashing replay would never end).
		for _, p := range sched.Policies() {
			for _, sw := range []struct{ backfill, preemption bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
				cfg := Config{Nodes: 4, NodeGPUs: 8, Policy: sched.Policy{Name: p, Backfill: sw.backfill, Preemption: sw.preemption,
					MinRunTime: sched.DefaultMinRunTime}, Record: true, Estimates: []string{EstimatesExact, EstimatesNoisy, EstimatesAbsent, EstimatesLearned}[seed%4]}
				cfg.window = 2 // windows of 2, 8, 32, ...: most cycles are windowed
				a, err := Run(jobs, cfg)
				if err != nil {
					t.Fatal(err)
				}
				cfg.FullQueue = true
				b, _ := Run(jobs, cfg)
				if !reflect.DeepEqual(a.Decisions, b.Decisions) || !reflect.DeepEqual(a.Jobs, b.Jobs) || a.Metrics.WithoutTiming() != b.Metrics.WithoutTiming() {
					t.Fatalf("seed %d, %s, %+v: windowed and whole-queue cycles differ", seed, p, sw)
				}
			}
		}
	}
}

// Same input, same output: the decisions and every metric but the
// wall-clock ones.
func TestDeterministic(t *testing.T) {
	jobs := randomTrace(7, 800)
	cfg := Config{Nodes: 3, NodeGPUs: 8, Policy: sched.Policy{Name: sched.PolicyFairShare, Backfill: true, Preemption: true},
		Estimates: EstimatesNoisy, Seed: 3, Record: true, Timing: true}
	a, _ := Run(jobs, cfg)
	b, _ := Run(jobs, cfg)
	if !reflect.DeepEqual(a.Decisions, b.Decisions) || !reflect.DeepEqual(a.Jobs, b.Jobs) || a.Metrics.WithoutTiming() != b.Metrics.WithoutTiming() {
		t.Fatal("two runs of the same input differ")
	}
}

// The plot is one SVG document with a line per policy in each panel.
func TestPlot(t *testing.T) {
	jobs := randomTrace(5, 200)
	var runs []PolicyRun
	for _, p := range []string{sched.PolicyFCFS, sched.PolicySJF} {
		out, err := Run(jobs, Config{Nodes: 2, NodeGPUs: 8, Policy: sched.Policy{Name: p, Backfill: true}, Series: true})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, PolicyRun{Policy: p, Outcome: out})
	}
	var b strings.Builder
	if err := WriteSVG(&b, runs, "a <test>"); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>\n") || strings.Count(svg, "<polyline") != 6 ||
		!strings.Contains(svg, "a &lt;test&gt;") {
		t.Fatalf("unexpected SVG:\n%.600s", svg)
	}
}

// A cycle is skipped only when it could decide nothing: skipping them
// changes no decision, with mixed priorities and with users who share
// projects.
func TestSkippedCyclesDecideNothing(t *testing.T) {
	for seed := range uint64(6) {
		jobs := randomTrace(seed, 400)
		for i := range jobs {
			if i%3 == 0 {
				jobs[i].User = jobs[i].User + "b" // a second user in the team's project
			}
		}
		for _, p := range sched.Policies() {
			for _, backfill := range []bool{true, false} {
				cfg := Config{Nodes: 4, NodeGPUs: 8, Policy: sched.Policy{Name: p, Backfill: backfill, Preemption: true,
					MinRunTime: sched.DefaultMinRunTime}, Record: true, Estimates: []string{EstimatesExact, EstimatesNoisy, EstimatesAbsent, EstimatesLearned}[seed%4]}
				a, err := Run(jobs, cfg)
				if err != nil {
					t.Fatal(err)
				}
				cfg.everyEvent = true
				b, _ := Run(jobs, cfg)
				if !reflect.DeepEqual(a.Decisions, b.Decisions) || !reflect.DeepEqual(a.Jobs, b.Jobs) {
					t.Fatalf("seed %d, %s, backfill %v: skipping cycles changed decisions", seed, p, backfill)
				}
				if a.Metrics.SchedCycles > b.Metrics.SchedCycles {
					t.Fatalf("seed %d, %s: %d cycles, more than %d at every event", seed, p, a.Metrics.SchedCycles, b.Metrics.SchedCycles)
				}
				t.Logf("seed %d, %s, backfill %v: %d cycles of %d, %d preemptions", seed, p, backfill, a.Metrics.SchedCycles, b.Metrics.SchedCycles, a.Metrics.Preemptions)
			}
		}
	}
}

// Starving jobs are tried before every other under fair_share: windowed
// cycles, which must hand the core every starving job, still decide
// what whole-queue cycles do, and so does skipping cycles; also where the
// starving threshold grows with the backlog (StarveBacklog) and where the
// oldest goes first once passed over (OldestBacklog, OldestStretch).
func TestWindowedIsExactStarving(t *testing.T) {
	variants := map[string]func(p *sched.Policy){
		"fixed":          func(*sched.Policy) {},
		"starve-backlog": func(p *sched.Policy) { p.StarveBacklog, p.StarveShare = 0.5, 1 },
		"the defaults":   func(p *sched.Policy) { p.StarveBacklog, p.StarveShare = 0, 0 },
		"oldest-backlog": func(p *sched.Policy) { p.OldestFirst, p.OldestBacklog, p.StarveShare = true, 0.5, 0.1 },
		"oldest-stretch": func(p *sched.Policy) { p.OldestFirst, p.OldestStretch, p.StarveShare = true, 2, 0.1 },
	}
	for name, variant := range variants {
		t.Run(name, func(t *testing.T) { windowedIsExactStarving(t, variant, name != "fixed") })
	}
}

// windowedIsExactStarving replays the policy variant windowed, whole and
// at every event; mustAct: its decisions must differ from the fixed
// threshold's somewhere, or the variant tested nothing.
func windowedIsExactStarving(t *testing.T, variant func(p *sched.Policy), mustAct bool) {
	acted := false
	for seed := range uint64(4) {
		jobs := randomTrace(seed, 400)
		for i := range jobs {
			if i%3 == 0 {
				jobs[i].User = jobs[i].User + "b" // a second user in the team's project
			}
		}
		for _, sw := range []struct{ backfill, preemption bool }{{true, false}, {false, false}, {true, true}} {
			cfg := Config{Nodes: 3, NodeGPUs: 8, Policy: sched.Policy{Name: sched.PolicyFairShare, Backfill: sw.backfill,
				Preemption: sw.preemption, MinRunTime: sched.DefaultMinRunTime, StarveAfter: 40 * time.Minute,
				StarveShare: 0.3, StarveBacklog: -1}, Record: true,
				Estimates: []string{EstimatesExact, EstimatesNoisy}[seed%2]}
			fixed := cfg
			variant(&cfg.Policy)
			cfg.window = 2
			a, err := Run(jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if mustAct && !acted {
				f, _ := Run(jobs, fixed)
				acted = !reflect.DeepEqual(a.Decisions, f.Decisions)
			}
			full := cfg
			full.FullQueue = true
			b, _ := Run(jobs, full)
			every := cfg
			every.everyEvent = true
			c, _ := Run(jobs, every)
			if !reflect.DeepEqual(a.Decisions, b.Decisions) || !reflect.DeepEqual(a.Jobs, b.Jobs) || a.Metrics.WithoutTiming() != b.Metrics.WithoutTiming() {
				t.Fatalf("seed %d, %+v: windowed and whole-queue cycles differ", seed, sw)
			}
			if !reflect.DeepEqual(a.Decisions, c.Decisions) {
				t.Fatalf("seed %d, %+v: skipping cycles changed decisions", seed, sw)
			}
			// The rule must have acted: some job waited past StarveAfter.
			if a.Metrics.MaxQueue < (40 * time.Minute).Seconds() {
				t.Fatalf("seed %d: no job waited 40 minutes (max %.0fs): the test tests nothing", seed, a.Metrics.MaxQueue)
			}
		}
	}
	if mustAct && !acted {
		t.Fatal("the variant decided as the fixed threshold does everywhere: the test tests nothing")
	}
}
