package sched

import (
	"math"
	"time"
)

// DefaultPlanDepth is how many waiting jobs EstimateStarts plans by default.
const DefaultPlanDepth = 500

// EstimateStarts says when each waiting job is expected to start, like
// squeue --start: running jobs end at their estimates (one that has
// outlived its estimate, at the estimate doubled until it has not), the
// cycle's starts
// run for theirs, and waiting jobs are laid out in queue order, each at
// the earliest time enough GPUs are free after the jobs before it. It does
// not assume later jobs are backfilled, so a job that backfills may start
// sooner. Only the first depth waiting jobs are planned; jobs that can
// never run, held jobs, jobs the timeline would start now (they did not
// start this cycle: something else keeps them), and the rest get no
// estimate: an estimate is never "now" for a job that cannot start now.
func EstimateStarts(s Snapshot, r Result, depth int) map[string]time.Time {
	p := s.Policy.WithDefaults()
	ix := newIndex(s.Nodes)
	jobs := make(map[string]*Job, len(s.Queue))
	for i := range s.Queue {
		jobs[s.Queue[i].ID] = &s.Queue[i]
	}
	preempted := map[string]bool{}
	for _, pr := range r.Preemptions {
		preempted[pr.JobID] = true
	}
	running := make([]Running, 0, len(s.Running))
	for _, run := range s.Running {
		if preempted[run.ID] {
			run.Preempting = true
		}
		run.Estimate = outlived(run.Estimate, s.Now.Sub(run.StartedAt))
		running = append(running, run)
	}
	for _, st := range r.Starts {
		ix.take(st.Placements)
	}
	tl := newTimeline(ix, running, nil, s.Now)
	tl.bk = newBookings(ix, s.Bookings, s.Now)
	for _, st := range r.Starts {
		est := p.DefaultEstimate
		if j := jobs[st.JobID]; j != nil {
			est = j.Estimate
		}
		tl.mark(ix, st.Placements, s.Now.Add(est))
	}
	var parts *partPlan // made for the first waiting slice or share (plan_parts.go)
	out := make(map[string]time.Time, min(len(r.Pending), depth))
	for i, pd := range r.Pending {
		if i >= depth {
			break
		}
		j := jobs[pd.JobID]
		if j != nil {
			j = elasticPlan(j, s.Now)
		}
		if j == nil || pd.Reason == ReasonUnsatisfiable || pd.Reason == ReasonNoNodes || pd.Reason == ReasonNodeDiskFull ||
			pd.Reason == ReasonUserCPUJobLimit || // it starts when one of its user's ends: not known
			j.Held != "" { // held (a budget's): it starts when someone acts, not at a time
			continue
		}
		if j.Fractional() { // a slice or share: on the parts' plan, not the whole GPUs' timeline
			if parts == nil {
				parts = newPartPlan(ix, &s, running, r.Starts, jobs, p.DefaultEstimate)
			}
			if at, ok := parts.earliest(j); ok && at.After(s.Now) {
				out[j.ID] = at
			}
			continue
		}
		if j.Booking != "" { // a job of a booking: its GPUs, in its window (booking_plan.go)
			if at, ps, ok := tl.bookedEarliest(ix, j); ok {
				out[j.ID] = at
				tl.mark(ix, ps, at.Add(j.Estimate))
			}
			continue
		}
		at, ps, ok := tl.earliest(ix, j)
		if !ok || !at.After(s.Now) {
			// Not now: it did not start this cycle, so what keeps it
			// waiting is something the timeline does not see (a quota,
			// its turn behind the head); its start is not known.
			continue
		}
		out[j.ID] = at
		tl.mark(ix, ps, at.Add(j.Estimate))
	}
	return out
}

// outlived is the estimate of a running job that has run for ran: est,
// or, once the job has outlived it, est doubled until the job has not.
// A job past its estimate is not about to end (the plan would say its
// GPUs are free now); nothing is ever stopped on an estimate.
func outlived(est, ran time.Duration) time.Duration {
	if est <= 0 {
		return est
	}
	for est <= ran && est < math.MaxInt64/2 {
		est *= 2
	}
	return est
}
