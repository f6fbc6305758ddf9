package sched

import "time"

// DefaultPlanDepth is how many waiting jobs EstimateStarts plans by default.
const DefaultPlanDepth = 500

// EstimateStarts says when each waiting job is expected to start, like
// squeue --start: running jobs end at their estimates, the cycle's starts
// run for theirs, and waiting jobs are laid out in queue order, each at
// the earliest time enough GPUs are free after the jobs before it. It does
// not assume later jobs are backfilled, so a job that backfills may start
// sooner. Only the first depth waiting jobs are planned; jobs that can
// never run, and the rest, get no estimate.
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
			pd.Reason == ReasonUserCPUJobLimit { // it starts when one of its user's ends: not known
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
		if !ok {
			continue
		}
		out[j.ID] = at
		tl.mark(ix, ps, at.Add(j.Estimate))
	}
	return out
}
