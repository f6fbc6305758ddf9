package runtimes

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// Estimate is a job's run time as the core is told it, and where it
// comes from.
type Estimate struct {
	// Run is what the core plans with (sched.Job.Estimate): the given
	// estimate, else a learned estimate's high end, else the fallback;
	// the time limit caps it.
	Run time.Duration
	// Given: the core may backfill the job past a reservation on Run (a
	// given or a learned estimate, as the simulator's learned estimates).
	Given bool
	// Low and Point are a learned estimate's low end and point (zero
	// otherwise).
	Low, Point time.Duration
	// Basis says where it comes from, for people: "from 12 runs of
	// resnet-sweep by ana", "given at submission", ...
	Basis string
}

// Apply sets the job's estimate fields of sj. A job with neither a given
// nor a learned estimate (the fallback's) is NoEstimate: sjf orders it by
// the GPU time it has attained (Tiresias), as the simulator's learned
// estimates do.
func (e Estimate) Apply(sj *sched.Job) {
	sj.Estimate, sj.EstimateGiven, sj.EstimateLow, sj.EstimatePoint = e.Run, e.Given, e.Low, e.Point
	sj.NoEstimate = !e.Given
}

// ApplyRunning sets the estimate fields of a running job.
func (e Estimate) ApplyRunning(r *sched.Running) {
	r.Estimate, r.EstimateLow, r.EstimatePoint = e.Run, e.Low, e.Point
}

// The bases of estimates that are not learned.
const (
	BasisGiven    = "given at submission (estimated_duration)"
	BasisFallback = "no history yet: the policy's default estimate"
)

// Fallback is a job's estimate without enough history, and its basis.
type Fallback func(user string) (time.Duration, string)

// Means are the users' mean run times (sched.Estimator).
type Means interface {
	Estimate(user string) (time.Duration, bool)
}

// MeanOr is the loop's Fallback: a job's user's mean run time in means,
// else def (the policy's default estimate).
func MeanOr(means Means, def time.Duration) Fallback {
	return func(user string) (time.Duration, string) {
		if d, ok := means.Estimate(user); ok && d > 0 {
			return d, "from " + user + "'s mean run time"
		}
		return def, BasisFallback
	}
}

// Estimator returns the estimate of each job for one snapshot at now:
// the job's estimated_duration when given; else the predictor's (the
// point and the p10-p90 range of the nearest history with enough runs;
// a running job that has outlived its high end gets a new one from the
// runs that lasted longer); else fb's. The time limit caps each.
// Nothing is ever stopped on an estimate: it only plans.
func (b *Book) Estimator(now time.Time, fb Fallback) func(j *api.Job) Estimate {
	var last *api.Job // queued jobs come in runs of one kind (an array's tasks, a sweep)
	var lastEst Estimate
	return func(j *api.Job) Estimate {
		if last != nil && j.State == api.StateQueued && sameKind(j, last) {
			return lastEst
		}
		e := b.estimate(j, now, fb)
		if j.State == api.StateQueued {
			last, lastEst = j, e
		}
		return e
	}
}

// sameKind reports whether two queued jobs get the same estimate: the
// same user, name, command, script, GPUs, time limit and given estimate.
func sameKind(a, b *api.Job) bool {
	return a.User == b.User && a.Name == b.Name && a.GPUCount == b.GPUCount && a.Nodes == b.Nodes &&
		samePtr(a.TimeLimit, b.TimeLimit) && samePtr(a.EstimatedDuration, b.EstimatedDuration) &&
		a.Command == b.Command && a.Script == b.Script
}

func samePtr[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// estimate is Estimator's answer for one job.
func (b *Book) estimate(j *api.Job, now time.Time, fb Fallback) Estimate {
	var limit time.Duration
	if j.TimeLimit != nil {
		limit = j.TimeLimit.Duration()
	}
	capped := func(d time.Duration) time.Duration {
		if limit > 0 {
			return min(d, limit)
		}
		return d
	}
	if j.EstimatedDuration != nil && j.EstimatedDuration.Duration() > 0 {
		return Estimate{Run: capped(j.EstimatedDuration.Duration()), Given: true, Basis: BasisGiven}
	}
	if l := b.predict(j, now, limit); l.ok {
		p := l.p
		return Estimate{Run: max(p.High, time.Second), Given: true, Low: max(p.Low, time.Second), Point: max(p.Point, time.Second),
			Basis: l.basis}
	}
	d, basis := fb(j.User)
	return Estimate{Run: capped(d), Basis: basis}
}

// Basis says where a job's estimate comes from (Estimator's Basis), for
// the API's views.
func (b *Book) Basis(j *api.Job, now time.Time, fb Fallback) string {
	return b.Estimator(now, fb)(j).Basis
}

// predict is the predictor's estimate of j at now, with its basis: a
// queued job's from the memo (a snapshot asks for thousands, of a few
// kinds), a running job's anew once it has outlived it.
func (b *Book) predict(j *api.Job, now time.Time, limit time.Duration) learned {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := query{user: j.User, name: j.Name, print: b.print(j), gpus: j.GPUCount * max(j.Nodes, 1), limit: limit}
	l, ok := b.memo[q]
	if !ok {
		l.p, l.ok = b.pred.Predict(sched.Query{User: q.user, Name: q.name, Command: q.print, GPUs: q.gpus, TimeLimit: limit})
		if l.ok {
			l.basis = l.p.String(j.User)
		}
		b.memo[q] = l
	}
	if !l.ok || !j.State.Active() || j.StartedAt == nil || j.StartedAt.Add(l.p.High).After(now) {
		return l
	}
	l.p, l.ok = b.pred.Predict(sched.Query{User: q.user, Name: q.name, Command: q.print, GPUs: q.gpus, TimeLimit: limit,
		Elapsed: now.Sub(*j.StartedAt)})
	l.basis = l.p.String(j.User)
	return l
}
