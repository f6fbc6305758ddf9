package sim

import (
	"time"

	"github.com/corral-sched/corral/internal/sched"
)

// learnedEstimate is job i's estimate from the predictor, having run
// elapsed so far: the high end of the predicted range, which backfill
// plans on, the point estimate (what its accuracy is measured on), and
// true; else the policy default and false (too little history: not
// backfilled onto reserved GPUs).
func (s *sim) learnedEstimate(i int, elapsed time.Duration) (est, point time.Duration, ok bool) {
	t := s.jobs[i].t
	p, ok := s.predictor.Predict(sched.Query{User: t.User, Name: t.Name, Command: t.Command, GPUs: t.GPUs, Elapsed: elapsed})
	if !ok {
		d := max(s.policy.DefaultEstimate, 2*elapsed)
		return d, d, false
	}
	return max(p.High, time.Second), max(p.Point, time.Second), true
}

// outlived gives each running job that has outlived its learned estimate
// a new one (sched.Predictor: from the runs that lasted longer).
func (s *sim) outlived() {
	for k := range s.running {
		r := &s.running[k]
		if r.Preempting || r.StartedAt.Add(r.Estimate).After(s.now) {
			continue
		}
		r.Estimate, _, _ = s.learnedEstimate(s.index(r.ID), s.now.Sub(r.StartedAt))
	}
}

// noEstimate reports whether job i has no estimate at all, given or
// learned from its user's history (sched.Job.NoEstimate).
func (s *sim) noEstimate(i int) bool {
	if s.jobs[i].given > 0 {
		return false
	}
	_, known := s.estimator.Estimate(s.jobs[i].t.User)
	return !known
}

// learnKey is what a queued job's learned estimate depends on.
type learnKey struct {
	user, name, command string
	gpus                int
}

// learnedEst is a queued job's learned estimate (learnedEstimate's).
type learnedEst struct {
	est time.Duration
	ok  bool
}

// relearnedEstimate is queued job i's learnedEstimate, made once per kind
// of job in a cycle that relearns (a queue holds thousands of jobs of a
// few kinds).
func (s *sim) relearnedEstimate(i int) (time.Duration, bool) {
	t := s.jobs[i].t
	k := learnKey{t.User, t.Name, t.Command, t.GPUs}
	e, ok := s.relearned[k]
	if !ok {
		e.est, _, e.ok = s.learnedEstimate(i, 0)
		if s.relearned == nil {
			s.relearned = map[learnKey]learnedEst{}
		}
		s.relearned[k] = e
	}
	return e.est, e.ok
}
