package sim

import (
	"slices"

	"github.com/corral-sched/corral/internal/sched"
)

// Windowed cycles.
//
// A cycle of the core sorts and walks the whole queue, so replaying a
// trace whose queue grows to thousands of jobs costs thousands of job
// visits per event. Most of them decide nothing: once the GPUs are gone,
// the rest of the queue only collects reasons for waiting, which the
// simulator does not use. So the simulator first hands the core only the
// head of the queue, and accepts the result only when it proves that the
// rest could not have changed any decision; otherwise it runs the cycle
// again on four times the window, up to the whole queue. The decisions are
// those of a cycle over the whole queue, always (TestWindowedIsExact
// checks it on random traces); only the cost changes.
//
// The queue is kept in lanes, each in the core's own order
// (sched.CompareQueued): one lane under a static policy (fcfs, sjf,
// priority), one per project and user under fair_share, whose walker takes
// each user's jobs in that order while users take turns. The window is the
// first w jobs of every lane; the rest of lane L is R.
//
// Why a result can be accepted. The core walks a lane's jobs in order, and
// a job it does not start changes nothing the walk depends on (fair
// share's turns move only when a job is placed), so the walk over the
// window is the walk over the whole queue with R left out; R's jobs would
// come right after the last windowed job of their lane, l. With backfill
// off, a job that does not start stops the walk for everything behind it:
// if l did not start, R decides nothing. With backfill on, if l (on one
// node) did not start, no node had gpus(l) free GPUs outside the head's
// reservation when it was tried, and free GPUs only get fewer as a cycle
// goes on; the reservation already existed. A job of R could then start
// only by needing fewer GPUs per node than l, or by backfilling onto the
// reserved GPUs: ending before the reservation, and only while some
// reserved GPUs are free. The reservation's free GPUs only shrink, and
// only when a job that ends before it starts; if none did and none are
// left at the end, none were left when R would have been tried. Without
// preemption and quotas (the only other ways a waiting job acts), a
// result passing these checks for every lane is the full cycle's.

// firstWindow is the first window tried: enough for a cycle that starts a
// few hundred jobs.
const firstWindow = 256

type lane struct {
	jobs []int // queued jobs, in the core's order
}

// laneFor is the lane of job i.
func (s *sim) laneFor(i int) *lane {
	key := [2]string{}
	if s.policy.Name == sched.PolicyFairShare {
		key = [2]string{s.qjob[i].Project, s.qjob[i].User}
	}
	k, ok := s.laneOf[key]
	if !ok {
		k = len(s.lanes)
		s.laneOf[key] = k
		s.lanes = append(s.lanes, &lane{})
	}
	return s.lanes[k]
}

func (s *sim) cmp(a, b int) int { return sched.CompareQueued(&s.qjob[a], &s.qjob[b], s.policy) }

func (l *lane) insert(s *sim, i int) {
	at, _ := slices.BinarySearchFunc(l.jobs, i, s.cmp)
	l.jobs = slices.Insert(l.jobs, at, i)
}

func (l *lane) remove(s *sim, i int) {
	at, ok := slices.BinarySearchFunc(l.jobs, i, s.cmp)
	if !ok || l.jobs[at] != i {
		// The order moved under the job (sjf with learned estimates, not
		// windowed): find it by value.
		at = slices.Index(l.jobs, i)
	}
	l.jobs = slices.Delete(l.jobs, at, at+1)
}

// buildQueue fills s.queue with the first w jobs of every lane, with
// their current estimates, and reports whether that is the whole queue.
func (s *sim) buildQueue(w int) bool {
	s.queue = s.queue[:0]
	whole := true
	for _, l := range s.lanes {
		n := len(l.jobs)
		if n > w {
			n, whole = w, false
		}
		for _, i := range l.jobs[:n] {
			q := &s.qjob[i]
			if s.cfg.Estimates == EstimatesAbsent {
				q.Estimate, q.EstimateGiven = sched.EstimateFor(s.jobs[i].given, s.jobs[i].t.User, s.estimator, s.policy.DefaultEstimate)
			}
			s.queue = append(s.queue, *q)
		}
	}
	return whole
}

// decisive reports whether a cycle's result over the first w jobs of every
// lane is the result over the whole queue (see the comment above).
func (s *sim) decisive(res sched.Result, w int) bool {
	for _, st := range res.Starts {
		s.mark[s.index(st.JobID)] = true
	}
	defer func() {
		for _, st := range res.Starts {
			s.mark[s.index(st.JobID)] = false
		}
	}()
	if !s.policy.Backfill {
		for _, l := range s.lanes {
			if len(l.jobs) > w && s.mark[l.jobs[w-1]] {
				return false
			}
		}
		return true
	}
	if len(s.lanes) == 1 {
		return s.decisiveAtEnd(res, w)
	}
	// Could a job of R backfill onto reserved GPUs? Only while some are
	// free, and only if it ends before the reservation.
	backfill := res.Head != "" && len(res.Held) > 0
	for _, st := range res.Starts {
		if q := &s.qjob[s.index(st.JobID)]; res.Head != "" && q.EstimateGiven && !s.now.Add(q.Estimate).After(res.ReservedAt) {
			backfill = true // it may have used reserved GPUs that R would have found free
		}
	}
	mostFree := 0
	for _, f := range s.nfree {
		mostFree = max(mostFree, f)
	}
	for _, l := range s.lanes {
		if len(l.jobs) <= w {
			continue
		}
		last := l.jobs[w-1]
		if s.mark[last] || s.jobs[last].nodes != 1 {
			return false
		}
		need := s.jobs[last].gpus
		for _, i := range l.jobs[w:] {
			j := &s.jobs[i]
			if j.gpus < need {
				return false
			}
			if backfill && j.gpus <= mostFree {
				if q := &s.qjob[i]; q.EstimateGiven && !s.now.Add(q.Estimate).After(res.ReservedAt) {
					return false
				}
			}
		}
	}
	return true
}

// decisiveAtEnd is decisive for a single lane (static policies), whose R
// the core would walk after every windowed job: R meets the GPUs as the
// cycle left them. A job of R could start on a node with its GPUs free
// outside the reservation, or, ending before the reservation, with its
// GPUs free counting the reserved ones.
func (s *sim) decisiveAtEnd(res sched.Result, w int) bool {
	l := s.lanes[0]
	if len(l.jobs) <= w {
		return true
	}
	free := s.scratchFree()
	for _, st := range res.Starts {
		for _, p := range st.Placements {
			free[s.nodeAt[p.NodeID]] -= len(p.GPUs)
		}
	}
	mostFree := 0 // counting reserved GPUs
	for _, f := range free {
		mostFree = max(mostFree, f)
	}
	for _, p := range res.Held {
		free[s.nodeAt[p.NodeID]] -= len(p.GPUs)
	}
	mostOpen := 0 // outside the reservation
	for _, f := range free {
		mostOpen = max(mostOpen, f)
	}
	backfill := res.Head != "" && len(res.Held) > 0
	for _, i := range l.jobs[w:] {
		j := &s.jobs[i]
		if j.gpus <= mostOpen {
			return false
		}
		if backfill && j.gpus <= mostFree {
			if q := &s.qjob[i]; q.EstimateGiven && !s.now.Add(q.Estimate).After(res.ReservedAt) {
				return false
			}
		}
	}
	return true
}

// scratchFree returns a copy of the free GPU counts per node.
func (s *sim) scratchFree() []int {
	s.free = append(s.free[:0], s.nfree...)
	return s.free
}
