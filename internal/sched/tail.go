package sched

import (
	"slices"
	"time"
)

// Long jobs at the tail.
//
// The makespan is set by the last job to end, and under fair_share that
// is a long job of a heavy team started late: a 23-day job that waits 23
// days ends 23 days after the rest of the work. Were it started while the
// cluster still had other work to do, its run would overlap that work. So
// under fair_share a job whose estimate is at least the backlog (the
// estimated work queued and still running, spread over every GPU: how long
// the cluster needs to drain what it has) is on the tail: waiting can only
// end it later than everything else, and it is served before every other
// job, the longest first. A job is on the tail only with an estimate it
// was given (or learned from its own history), never the policy default.
// Such jobs are few (one longer than the whole backlog) and they go first
// outside the starving budget: they do not delay the short jobs for long,
// since the cluster runs the same work either way, only in another order.

// DefaultTailFactor multiplies the backlog to give the shortest estimate
// on the tail, when the policy does not say.
const DefaultTailFactor = 1.0

// tailFactor is p's TailFactor with its default; 0: no tail.
func tailFactor(p *Policy) float64 {
	f := p.TailFactor
	switch {
	case p.Name != PolicyFairShare || f < 0:
		return 0
	case f == 0:
		return DefaultTailFactor
	}
	return f
}

// WorkOf is the GPU-seconds of estimated work a queued job adds to the
// backlog: its given estimate times its GPUs (every task of a group);
// zero without a given estimate. A caller that hands the core part of
// its queue sums it over the jobs it leaves out (Snapshot.LeftOutWork).
func WorkOf(j *Job) int64 {
	if !j.EstimateGiven || j.Estimate <= 0 {
		return 0
	}
	return int64(j.Estimate/time.Second) * int64(j.GPUs*nodesWanted(j)) * int64(max(j.Count, 1))
}

// TailCut is the shortest estimate on the tail in s (see above): the
// backlog in time, times the policy's TailFactor; false when no job can
// be on the tail (another policy, the rule off, no GPUs).
func TailCut(s *Snapshot) (time.Duration, bool) {
	p := s.Policy.WithDefaults()
	f := tailFactor(&p)
	if f == 0 {
		return 0, false
	}
	b, ok := Backlog(s)
	if !ok {
		return 0, false
	}
	return time.Duration(f * float64(b)), true
}

// Backlog is how long s's cluster needs to drain the work it has: the
// given estimates of the jobs queued (and left out of the snapshot,
// LeftOutWork) and the estimated rest of the jobs running, in GPU-seconds,
// over every GPU; false without GPUs.
func Backlog(s *Snapshot) (time.Duration, bool) {
	gpus, work := queuedWork(s) // drain.go
	if gpus == 0 {
		return 0, false
	}
	for i := range s.Running {
		r := &s.Running[i]
		if r.Preempting {
			continue
		}
		if left := r.StartedAt.Add(r.Estimate).Sub(s.Now); left > 0 {
			work += int64(left/time.Second) * int64(gpuCount(r))
		}
	}
	return time.Duration(work/gpus) * time.Second, true
}

// DefaultTailWait is the share of its estimate a job waits before it
// may go first on the tail, when the policy does not say.
const DefaultTailWait = 0.02

// OnTail reports whether job j, queued at now, is on the tail given the
// cut (see TailCut): its estimate is at least the cut, and it has waited
// TailWait of it. A job that has run before (Attained: preempted, or
// requeued after a loss) is not: going first would let a job fair share
// just preempted take its GPUs straight back from the job it was
// preempted for, and be preempted again.
func OnTail(j *Job, cut time.Duration, now time.Time, p *Policy) bool {
	if !j.EstimateGiven || j.GPUs == 0 || j.Estimate < cut || j.Attained > 0 {
		return false
	}
	f := p.TailWait
	if f == 0 {
		f = DefaultTailWait
	}
	return f < 0 || !j.SubmittedAt.After(now.Add(-time.Duration(f*float64(j.Estimate))))
}

// tailOf returns the jobs of sorted (in aged-priority order) on the tail,
// the longest first (ties in the order of sorted).
func tailOf(sorted []*Job, cut time.Duration, now time.Time, p *Policy) []*Job {
	var tail []*Job
	for _, j := range sorted {
		if OnTail(j, cut, now, p) {
			tail = append(tail, j)
		}
	}
	slices.SortStableFunc(tail, func(a, b *Job) int {
		switch {
		case a.Estimate > b.Estimate:
			return -1
		case a.Estimate < b.Estimate:
			return 1
		}
		return 0
	})
	return tail
}
