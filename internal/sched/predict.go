package sched

import (
	"fmt"
	"slices"
	"time"
)

// Learned run times.
//
// A Predictor learns from ended attempts how long jobs run, and estimates
// a job's run time from the nearest history that has enough samples: the
// same user's runs of the same job name, else of the same command, else
// of the same GPU count, else the whole cluster's. The point estimate is
// the mean of the most recent runs there; the range is their 10th to 90th
// percentile. The job's time limit caps all three. A job that has already
// run longer than its estimate (a running job, Query.Elapsed) gets a new
// one from the recent runs that lasted longer, or twice what it has run
// when none did: estimates only ever plan, nothing is killed on one.
// Without enough history there is no estimate (Predict's ok is false),
// and the caller falls back to what the job has attained so far
// (Tiresias: a job that has run least goes first, so short jobs still go
// first without estimates).
//
// Not safe for concurrent use; it does no I/O and reads no clock.

// Defaults of a Predictor.
const (
	DefaultPredictWindow     = 20 // recent runs kept per key
	DefaultPredictMinSamples = 3  // runs a key needs before it is used
)

// Attempt is one ended attempt, as a Predictor learns from it.
type Attempt struct {
	User, Project string
	Name          string // the job's name ("" none)
	Command       string // a fingerprint of the command ("" none)
	GPUs          int    // GPUs in all
	GPUModel      string
	TimeLimit     time.Duration // the limit asked for (0 none)
	Ran           time.Duration // how long it actually ran
}

// Query is a job whose run time is wanted.
type Query struct {
	User, Name, Command string
	GPUs                int
	TimeLimit           time.Duration // caps every estimate (0 none)
	// Elapsed is how long the job has run so far (a running job); an
	// estimate is never below it.
	Elapsed time.Duration
}

// Prediction is an estimated run time with its range and basis.
type Prediction struct {
	Point, Low, High time.Duration
	// Basis says which history it came from: "name", "command", "gpus"
	// or "cluster"; Samples how many runs; Key the name, command or GPU
	// count it matched (empty for the cluster).
	Basis   string
	Samples int
	Key     string
}

// String says where the estimate comes from, for people: "from 12 runs
// of resnet-sweep by ana".
func (p Prediction) String(user string) string {
	switch p.Basis {
	case "name":
		return fmt.Sprintf("from %d runs of %s by %s", p.Samples, p.Key, user)
	case "command":
		return fmt.Sprintf("from %d runs of the same command by %s", p.Samples, user)
	case "gpus":
		return fmt.Sprintf("from %d runs of %s-GPU jobs by %s", p.Samples, p.Key, user)
	case "cluster":
		return fmt.Sprintf("from the cluster's last %d runs", p.Samples)
	}
	return "no history"
}

// Predictor learns run times from ended attempts (see above).
type Predictor struct {
	window, minSamples int
	byName             map[[2]string]*ring
	byCommand          map[[2]string]*ring
	byGPUs             map[predictGPUKey]*ring
	cluster            ring
	scratch            []time.Duration
}

type predictGPUKey struct {
	user string
	gpus int
}

// ring holds the most recent run times of one key, oldest first once
// full (at next).
type ring struct {
	runs []time.Duration
	next int
}

func (r *ring) add(d time.Duration, window int) {
	if len(r.runs) < window {
		r.runs = append(r.runs, d)
		return
	}
	r.runs[r.next] = d
	r.next = (r.next + 1) % window
}

// NewPredictor returns a predictor with no history that keeps the last
// window runs per key and uses a key once it has minSamples (zero or
// less: the defaults).
func NewPredictor(window, minSamples int) *Predictor {
	if window <= 0 {
		window = DefaultPredictWindow
	}
	if minSamples <= 0 {
		minSamples = DefaultPredictMinSamples
	}
	minSamples = min(minSamples, window)
	return &Predictor{window: window, minSamples: minSamples, byName: map[[2]string]*ring{},
		byCommand: map[[2]string]*ring{}, byGPUs: map[predictGPUKey]*ring{}}
}

// Observe learns from one ended attempt.
func (p *Predictor) Observe(a Attempt) {
	add := func(m map[[2]string]*ring, k [2]string) {
		r := m[k]
		if r == nil {
			r = &ring{}
			m[k] = r
		}
		r.add(a.Ran, p.window)
	}
	if a.Name != "" {
		add(p.byName, [2]string{a.User, a.Name})
	}
	if a.Command != "" {
		add(p.byCommand, [2]string{a.User, a.Command})
	}
	k := predictGPUKey{a.User, a.GPUs}
	r := p.byGPUs[k]
	if r == nil {
		r = &ring{}
		p.byGPUs[k] = r
	}
	r.add(a.Ran, p.window)
	p.cluster.add(a.Ran, p.window)
}

// Predict estimates q's run time from the nearest history with enough
// samples; false when there is none.
func (p *Predictor) Predict(q Query) (Prediction, bool) {
	var r *ring
	pr := Prediction{}
	switch {
	case q.Name != "" && p.enough(p.byName[[2]string{q.User, q.Name}]):
		r, pr.Basis, pr.Key = p.byName[[2]string{q.User, q.Name}], "name", q.Name
	case q.Command != "" && p.enough(p.byCommand[[2]string{q.User, q.Command}]):
		r, pr.Basis, pr.Key = p.byCommand[[2]string{q.User, q.Command}], "command", q.Command
	case p.enough(p.byGPUs[predictGPUKey{q.User, q.GPUs}]):
		r, pr.Basis, pr.Key = p.byGPUs[predictGPUKey{q.User, q.GPUs}], "gpus", fmt.Sprint(q.GPUs)
	case p.enough(&p.cluster):
		r, pr.Basis = &p.cluster, "cluster"
	default:
		return Prediction{}, false
	}
	runs := r.runs
	if q.Elapsed > 0 {
		// It has outlived some of them: what the longer ones ran.
		runs = p.scratch[:0]
		for _, d := range r.runs {
			if d > q.Elapsed {
				runs = append(runs, d)
			}
		}
		p.scratch = runs
	}
	pr.Samples = len(r.runs)
	if len(runs) == 0 {
		pr.Point, pr.Low, pr.High = 2*q.Elapsed, q.Elapsed, 2*q.Elapsed
	} else {
		sorted := slices.Clone(runs)
		slices.Sort(sorted)
		var sum time.Duration
		for _, d := range sorted {
			sum += d
		}
		pr.Point = sum / time.Duration(len(sorted))
		pr.Low, pr.High = percentile(sorted, 10), percentile(sorted, 90)
	}
	if q.TimeLimit > 0 {
		pr.Point, pr.Low, pr.High = min(pr.Point, q.TimeLimit), min(pr.Low, q.TimeLimit), min(pr.High, q.TimeLimit)
	}
	pr.Point, pr.Low, pr.High = max(pr.Point, q.Elapsed), max(pr.Low, q.Elapsed), max(pr.High, q.Elapsed)
	pr.Low, pr.High = min(pr.Low, pr.Point), max(pr.High, pr.Point)
	return pr, true
}

func (p *Predictor) enough(r *ring) bool { return r != nil && len(r.runs) >= p.minSamples }

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, pct int) time.Duration {
	k := (pct*len(sorted) + 99) / 100
	return sorted[min(max(k, 1), len(sorted))-1]
}
