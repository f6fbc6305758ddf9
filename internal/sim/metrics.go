package sim

import (
	"math"
	"slices"
	"time"
)

// Metrics is a simulation's summary: `corral sim --json` prints exactly
// these fields. Times are seconds; percentiles are nearest-rank.
type Metrics struct {
	Jobs      int `json:"jobs"`      // jobs in the trace
	Completed int `json:"completed"` // jobs that ran to the end

	// Job completion time: end minus submission, over completed jobs.
	AvgJCT float64 `json:"avg_jct_s"`
	P50JCT float64 `json:"p50_jct_s"`
	P95JCT float64 `json:"p95_jct_s"`
	P99JCT float64 `json:"p99_jct_s"`
	// Time queued (all attempts together), over completed jobs.
	AvgQueue float64 `json:"avg_queue_s"`
	P95Queue float64 `json:"p95_queue_s"`
	MaxQueue float64 `json:"max_queue_s"`

	// Makespan: first submission to last completion.
	Makespan float64 `json:"makespan_s"`
	// MakespanLowerBound: max(total GPU-seconds / GPUs, latest
	// submission + duration), from the first submission, over the jobs
	// that fit the cluster. No schedule can finish sooner.
	MakespanLowerBound float64 `json:"makespan_lower_bound_s"`
	// MakespanArrivalBound: the most, over every submission time t, of
	// (t - the first submission) + the GPU-seconds submitted at or after t
	// / GPUs; and at least MakespanLowerBound (t the first submission). No
	// schedule can finish sooner either: the work submitted after t needs
	// that long after t. Where the cluster idles at first for lack of
	// work, it is well above MakespanLowerBound, which counts the idle
	// start as time the work could have run.
	MakespanArrivalBound float64 `json:"makespan_arrival_bound_s"`
	// Utilization: allocated GPU-seconds / available GPU-seconds over the
	// makespan. Preempted attempts count: their GPUs were allocated.
	Utilization float64 `json:"utilization"`
	// BacklogUtilization: the same, over the time some job was queued
	// (every queued job fits an empty cluster; those that never could are
	// not queued). 1 means no GPU sat idle while work waited.
	BacklogUtilization float64 `json:"backlog_utilization"`
	// JainFairness: Jain's index over the teams' mean bounded slowdowns,
	// max(1, JCT / max(duration, 10s)). 1: every team was slowed alike.
	JainFairness float64 `json:"jain_fairness"`
	Preemptions  int     `json:"preemptions"`
	// The estimates the scheduler was told, against the truth, as
	// shares of the jobs queued: within ±50% of the run time, off by
	// more than 2x either way, and none (too little history for a
	// learned estimate: the policy default was assumed).
	EstimatesWithin50 float64 `json:"estimates_within_50pct"`
	EstimatesOff2x    float64 `json:"estimates_off_2x"`
	EstimatesNone     float64 `json:"estimates_none"`
	// SchedCycles counts the core's cycles; SchedCycleP99Ms is the 99th
	// percentile of their wall time (a measurement: it varies run to run).
	SchedCycles     int     `json:"sched_cycles"`
	SchedCycleP99Ms float64 `json:"sched_cycle_p99_ms"`
	// WallS is the wall time of the whole run (a measurement).
	WallS float64 `json:"wall_s"`
}

// WithoutTiming returns m with its wall-clock measurements zeroed: what is
// left is a pure function of the trace and the configuration.
func (m Metrics) WithoutTiming() Metrics {
	m.SchedCycleP99Ms, m.WallS = 0, 0
	return m
}

// boundedSlowdownFloor is the run time below which slowdown stops growing:
// a 1-second job that waits a minute is not 60 times worse off than a
// 10-second one.
const boundedSlowdownFloor = 10 * time.Second

// accumulator integrates allocated GPUs over time, overall and while work
// is queued.
type accumulator struct {
	first, last time.Time
	allocGS     float64 // GPU-seconds allocated
	backlogGS   float64 // GPU-seconds allocated while some job was queued
	backlogT    float64 // seconds during which some job was queued
}

func (a *accumulator) start(t time.Time) { a.first, a.last = t, t }

// advance accounts for [last, now) with alloc GPUs held and queued jobs
// waiting, the state since the previous event.
func (a *accumulator) advance(now time.Time, alloc, queued int) {
	dt := now.Sub(a.last).Seconds()
	if dt <= 0 {
		return
	}
	a.allocGS += float64(alloc) * dt
	if queued > 0 {
		a.backlogGS += float64(alloc) * dt
		a.backlogT += dt
	}
	a.last = now
}

// finish fills the outcome's per-job records and metrics.
func (s *sim) finish() {
	gpus := float64(s.cfg.Nodes * s.cfg.NodeGPUs)
	m := &s.out.Metrics
	m.Jobs = len(s.jobs)
	m.SchedCycles = s.cycles
	m.Preemptions = s.stopped
	var jct, queued []float64
	var estimated, within, off, none int
	var first, lastEnd, latestIdeal time.Time
	var totalGS float64
	var arrivals []arrival
	type teamAcc struct {
		sum float64
		n   int
	}
	teams := map[string]*teamAcc{}
	var teamOrder []string
	s.out.Jobs = make([]JobOutcome, len(s.jobs))
	for i := range s.jobs {
		j := &s.jobs[i]
		t := j.t
		if first.IsZero() || t.Submit.Before(first) {
			first = t.Submit
		}
		o := JobOutcome{ID: t.ID, Team: t.Team, Submit: t.Submit, Duration: t.Duration, GPUs: t.GPUs,
			FirstStart: j.firstStart, Queued: j.queued, Preemptions: j.preemptions}
		if j.state == stUnsat {
			s.out.Unsatisfiable++
		} else {
			totalGS += s.gpusOf(t) * t.Duration.Seconds() // a slice its part (mig.go)
			arrivals = append(arrivals, arrival{t.Submit, s.gpusOf(t) * t.Duration.Seconds()})
			if ideal := t.Submit.Add(t.Duration); ideal.After(latestIdeal) {
				latestIdeal = ideal
			}
		}
		if j.estimated {
			estimated++
			truth, e := t.Duration.Seconds(), j.firstEstimate.Seconds()
			switch {
			case e == 0:
				none++
			case math.Abs(e-truth) <= 0.5*truth:
				within++
			case e > 2*truth || 2*e < truth:
				off++
			}
		}
		if j.state == stDone {
			o.Completed, o.End = true, j.end
			m.Completed++
			c := j.end.Sub(t.Submit).Seconds()
			jct = append(jct, c)
			queued = append(queued, j.queued.Seconds())
			if j.end.After(lastEnd) {
				lastEnd = j.end
			}
			ta := teams[t.Team]
			if ta == nil {
				ta = &teamAcc{}
				teams[t.Team] = ta
				teamOrder = append(teamOrder, t.Team)
			}
			ta.sum += max(1, c/max(t.Duration, boundedSlowdownFloor).Seconds())
			ta.n++
		}
		s.out.Jobs[i] = o
	}
	if m.Completed > 0 {
		m.AvgJCT, m.P50JCT, m.P95JCT, m.P99JCT = mean(jct), pct(jct, 50), pct(jct, 95), pct(jct, 99)
		m.AvgQueue, m.P95Queue, m.MaxQueue = mean(queued), pct(queued, 95), slices.Max(queued)
		m.Makespan = lastEnd.Sub(first).Seconds()
	}
	if !latestIdeal.IsZero() {
		m.MakespanLowerBound = max(totalGS/gpus, latestIdeal.Sub(first).Seconds())
		m.MakespanArrivalBound = max(m.MakespanLowerBound, arrivalBound(arrivals, first, gpus))
	}
	if m.Makespan > 0 {
		m.Utilization = s.acc.allocGS / (gpus * m.Makespan)
	}
	if s.acc.backlogT > 0 {
		m.BacklogUtilization = s.acc.backlogGS / (gpus * s.acc.backlogT)
	}
	if estimated > 0 {
		n := float64(estimated)
		m.EstimatesWithin50, m.EstimatesOff2x, m.EstimatesNone = round(float64(within)/n, 4), round(float64(off)/n, 4), round(float64(none)/n, 4)
	}
	slows := make([]float64, 0, len(teamOrder))
	for _, t := range teamOrder {
		slows = append(slows, teams[t].sum/float64(teams[t].n))
	}
	m.JainFairness = jain(slows)
	if len(s.out.Cycles) > 0 {
		ms := make([]float64, len(s.out.Cycles))
		for i, d := range s.out.Cycles {
			ms[i] = float64(d) / float64(time.Millisecond)
		}
		m.SchedCycleP99Ms = round(pct(ms, 99), 3)
	}
	m.AvgJCT, m.P50JCT, m.P95JCT, m.P99JCT = round(m.AvgJCT, 3), round(m.P50JCT, 3), round(m.P95JCT, 3), round(m.P99JCT, 3)
	m.AvgQueue, m.P95Queue, m.MaxQueue = round(m.AvgQueue, 3), round(m.P95Queue, 3), round(m.MaxQueue, 3)
	m.Makespan, m.MakespanLowerBound = round(m.Makespan, 3), round(m.MakespanLowerBound, 3)
	m.MakespanArrivalBound = round(m.MakespanArrivalBound, 3)
	m.Utilization, m.BacklogUtilization, m.JainFairness = round(m.Utilization, 5), round(m.BacklogUtilization, 5), round(m.JainFairness, 5)
}

// jain is Jain's fairness index: (sum x)^2 / (n sum x^2); 1 when all are
// equal, 1/n when one takes all. 0 for no values.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// pct is the nearest-rank percentile: the smallest value with at least p%
// of the values at or below it. It sorts xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	k := int(math.Ceil(p / 100 * float64(len(xs))))
	return xs[min(max(k, 1), len(xs))-1]
}

func round(x float64, places int) float64 {
	f := math.Pow10(places)
	return math.Round(x*f) / f
}

// arrival is a job's submission and its GPU-seconds of work.
type arrival struct {
	at   time.Time
	work float64
}

// arrivalBound is the most, over every submission time t, of (t - first)
// + the work submitted at or after t over gpus (MakespanArrivalBound).
func arrivalBound(as []arrival, first time.Time, gpus float64) float64 {
	slices.SortFunc(as, func(a, b arrival) int { return b.at.Compare(a.at) })
	best, work := 0.0, 0.0
	for _, a := range as {
		work += a.work
		best = max(best, a.at.Sub(first).Seconds()+work/gpus)
	}
	return best
}
