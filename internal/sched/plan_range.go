package sched

import "time"

// StartRange is a waiting job's estimated start: At as planned with the
// point estimates, From and To the earliest and latest of the plans made
// with the low ends, the points and the high ends of the estimates.
type StartRange struct {
	At, From, To time.Time
}

// EstimateStartRanges is EstimateStarts made with each job's run time
// three times over: as the core sees it (Estimate, a learned estimate's
// high end), with the points (EstimatePoint) and with the low ends
// (EstimateLow) of the running and waiting jobs that have them. A job
// gets a range where the first plan gives it a start (so a job that
// cannot start now never gets "now"); At is the point plan's start, or
// the first's where that plan gives none; From and To are the earliest
// and the latest start the plans give (a plan is a list schedule, and
// shorter jobs ahead can start a job later, so neither end is assumed).
// Without learned estimates in the plan, the three plans are one.
func EstimateStartRanges(s Snapshot, r Result, depth int) map[string]StartRange {
	high := EstimateStarts(s, r, depth)
	out := make(map[string]StartRange, len(high))
	for id, t := range high {
		out[id] = StartRange{At: t, From: t, To: t}
	}
	if len(high) == 0 || !rangedPlan(s, r, depth) {
		return out
	}
	for i, low := range []bool{false, true} {
		at := EstimateStarts(withEstimates(s, r, depth, low), r, depth)
		for id, sr := range out {
			t, ok := at[id]
			if !ok {
				continue
			}
			if i == 0 {
				sr.At = t
			}
			if t.Before(sr.From) {
				sr.From = t
			}
			if t.After(sr.To) {
				sr.To = t
			}
			out[id] = sr
		}
	}
	return out
}

// rangedPlan reports whether a job the plan looks at has an estimate
// with a range.
func rangedPlan(s Snapshot, r Result, depth int) bool {
	for i := range s.Running {
		if ranged(s.Running[i].Estimate, s.Running[i].EstimateLow, s.Running[i].EstimatePoint) {
			return true
		}
	}
	want := planned(r, depth)
	for i := range s.Queue {
		j := &s.Queue[i]
		if want[j.ID] && ranged(j.Estimate, j.EstimateLow, j.EstimatePoint) {
			return true
		}
	}
	return false
}

func ranged(est, low, point time.Duration) bool {
	return (low > 0 && low != est) || (point > 0 && point != est)
}

// planned is the set of jobs EstimateStarts reads from the queue: the
// cycle's starts and the first depth waiting jobs.
func planned(r Result, depth int) map[string]bool {
	want := make(map[string]bool, len(r.Starts)+min(len(r.Pending), depth))
	for _, st := range r.Starts {
		want[st.JobID] = true
	}
	for i, pd := range r.Pending {
		if i >= depth {
			break
		}
		want[pd.JobID] = true
	}
	return want
}

// withEstimates is s with the point (or, low, the low end) of each
// estimate that has one as its Estimate: the running jobs, and the
// queued jobs the plan looks at (only those are copied).
func withEstimates(s Snapshot, r Result, depth int, low bool) Snapshot {
	pick := func(est, lo, point time.Duration) time.Duration {
		if low && lo > 0 {
			return lo
		}
		if point > 0 {
			return point
		}
		return est
	}
	out := s
	out.Running = make([]Running, len(s.Running))
	for i, run := range s.Running {
		run.Estimate = pick(run.Estimate, run.EstimateLow, run.EstimatePoint)
		out.Running[i] = run
	}
	want := planned(r, depth)
	out.Queue = make([]Job, 0, len(want))
	for i := range s.Queue {
		if j := s.Queue[i]; want[j.ID] {
			j.Estimate = pick(j.Estimate, j.EstimateLow, j.EstimatePoint)
			out.Queue = append(out.Queue, j)
		}
	}
	return out
}
