package sim

import (
	"math"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/sched"
)

// Skipped cycles.
//
// The simulator runs a cycle at an event only if the cycle could decide
// something: start a job, or preempt one. (A cycle's only other output,
// why each job waits, the simulator does not use.) The tests below are
// necessary conditions of the core's rules: when one fails, the core
// would decide nothing, so skipping the cycle changes no decision
// (TestSkippedCyclesDecideNothing runs every event's cycle and compares).

// couldDecide reports whether a cycle now could start or preempt anything.
// A job can start only on a node with at least its GPUs per node free;
// when every queued job asks more than the freest node has, only a
// preemption could come of the cycle (couldPreempt).
func (s *sim) couldDecide() bool {
	if s.queued == 0 {
		return false
	}
	if s.cfg.everyEvent || len(s.cfg.MIG) > 0 || s.cfg.Shared > 0 || len(s.policy.UserQuotas) > 0 || len(s.policy.ProjectQuotas) > 0 {
		return true
	}
	most := 0
	for _, f := range s.nfree {
		most = max(most, f)
	}
	for g := 0; g <= most && g < len(s.needs); g++ {
		if s.needs[g] > 0 {
			return true
		}
	}
	return s.policy.Preemption && s.couldPreempt()
}

// userBook and projectBook hold, for couldPreempt, what a user or a
// project holds at the event being judged, and their fair-share standing.
type userBook struct {
	name     string
	gen      int     // the event they were filled for (skipScratch.gen)
	held     int     // GPUs held
	usage    float64 // decayed GPU-seconds, running attempts included (fair_share)
	standing float64
	lowest   int // the lowest priority of their jobs that may be preempted now (math.MaxInt: none)
}

type projectBook struct {
	name     string
	gen      int
	held     int
	usage    float64
	standing float64
}

type skipScratch struct {
	gen     int
	runUser []*userBook // each running job's user
	runJob  []int       // each running job's position in sim.jobs
	open    []bool      // each running job: past MinRunTime, so it may be preempted
	lanes   []*lane     // fair_share: lanes with jobs, in the walk's order
	tried   []int       // queued jobs a cycle would look for victims for
	room    []int       // per node: free GPUs and those preemption could free
	victims bool        // some running job may be preempted now
	lowest  int         // the lowest priority of those
}

// user returns u's book, emptied first if it was filled for another event:
// no GPUs, and the ledger's usage.
func (s *sim) user(u *userBook) *userBook {
	if u.gen != s.skip.gen {
		*u = userBook{name: u.name, gen: s.skip.gen, lowest: math.MaxInt}
		if s.policy.Name == sched.PolicyFairShare {
			u.usage = s.ledger.UserUsage(u.name, s.now)
			u.standing = sched.UserStanding(&s.policy, u.name, u.usage, 0)
		}
	}
	return u
}

func (s *sim) project(p *projectBook) *projectBook {
	if p.gen != s.skip.gen {
		*p = projectBook{name: p.name, gen: s.skip.gen}
		if s.policy.Name == sched.PolicyFairShare {
			p.usage = s.ledger.ProjectUsage(p.name, s.now)
			p.standing = sched.ProjectStanding(&s.policy, p.name, p.usage, 0)
		}
	}
	return p
}

// preemptTries is the core's bound on the waiting jobs a cycle looks for
// victims for (sched's maxPreemptTries).
const preemptTries = 4

// couldPreempt reports whether a cycle now, in which no job can start,
// could preempt a running job. With no start, the jobs a cycle looks for
// victims for are the first waiting ones in its walk (four with backfill,
// one without: the first becomes the head, and every later job waits
// behind it), judged against the snapshot as it is, since only a
// preemption or a claim would move the fair-share holdings. A running job
// v may be preempted for a queued job j (sched's eligible, planVictims)
// only if
//
//   - v is not being preempted already (when some job is, a waiting job
//     may claim its GPUs, which moves the holdings: every cycle runs), is
//     not protected (it started less than min_run_time ago: its
//     protection ends with an event, evProtected, and every event asks
//     again);
//   - v has a lower priority than j and, under the static policies or
//     when it is j's user's, would queue behind j once requeued; or, when
//     it is another user's, under fair_share, v has j's
//     priority and v's user holds more GPUs than j's user would with j,
//     and stands higher (sched.UserStanding); and under fair_share, in
//     both cases, v's user or project would still stand no lower than
//     j's once v's GPUs are j's (sched's staysBehind, for v alone);
//   - and on enough nodes for j, the free GPUs and those of such victims
//     are at least the GPUs j asks per node.
//
// Fair-share standings are computed as the core computes them, with a
// margin: a near tie counts both ways, so that a rounding difference can
// only run a cycle that decides nothing, never skip one that decides.
func (s *sim) couldPreempt() bool {
	if !s.laneOrdered() || s.mayStarve() || s.mayTail() {
		return true // (starving jobs and those on the tail are tried first: not judged here)
	}
	if !s.holdings() {
		return true // a job is being preempted
	}
	if !s.skip.victims {
		return false
	}
	for _, i := range s.triedJobs() {
		if s.roomFor(i) {
			return true
		}
	}
	return false
}

// laneOrdered reports whether the lanes are in the core's order (sjf on
// learned estimates moves it under them).
func (s *sim) laneOrdered() bool {
	return !(s.policy.Name == sched.PolicySJF && (s.cfg.Estimates == EstimatesAbsent || s.cfg.Estimates == EstimatesLearned))
}

// holdings fills the books of each running job's user and project: GPUs
// held, usage and standing, and the lowest priority that may be preempted
// now. It returns false when a running job is being preempted.
func (s *sim) holdings() bool {
	s.skip.gen++
	fair := s.policy.Name == sched.PolicyFairShare
	s.skip.runUser, s.skip.runJob, s.skip.open = s.skip.runUser[:0], s.skip.runJob[:0], s.skip.open[:0]
	s.skip.victims, s.skip.lowest = false, math.MaxInt
	cut := s.now.Add(-s.policy.MinRunTime) // started after it: protected
	for k := range s.running {
		r := &s.running[k]
		if r.Preempting {
			return false
		}
		i := s.index(r.ID)
		j := &s.jobs[i]
		u := s.user(s.users[j.user])
		s.skip.runUser = append(s.skip.runUser, u)
		s.skip.runJob = append(s.skip.runJob, i)
		n := 0
		for _, pl := range r.Placements {
			n += len(pl.GPUs)
		}
		u.held += n
		open := !r.StartedAt.After(cut)
		s.skip.open = append(s.skip.open, open)
		if open {
			u.lowest = min(u.lowest, r.Priority)
			s.skip.lowest = min(s.skip.lowest, r.Priority)
			s.skip.victims = true
		}
		if !fair {
			continue
		}
		// As sched.ChargeRunning adds it, in the same order.
		p := s.project(s.projects[j.project])
		p.held += n
		if s.now.After(r.StartedAt) {
			gs := float64(n) * s.now.Sub(r.StartedAt).Seconds()
			u.usage += gs
			p.usage += gs
		}
	}
	if fair {
		for k := range s.running {
			u, p := s.skip.runUser[k], s.projects[s.jobs[s.skip.runJob[k]].project]
			u.standing = sched.UserStanding(&s.policy, u.name, u.usage, u.held)
			p.standing = sched.ProjectStanding(&s.policy, p.name, p.usage, p.held)
		}
	}
	return true
}

// staysBehind is sched's rule of the same name for one victim alone, the
// running job at position k, and job j asking need GPUs: v's user (same
// project) or project (another) must stand no lower than j's with v's
// GPUs gone and j's held. (The core counts every victim of a plan
// together, which only makes it stricter.)
func (s *sim) staysBehind(r *sched.Running, k int, j *simJob, need int) bool {
	n := 0
	for _, pl := range r.Placements {
		n += len(pl.GPUs)
	}
	vj := &s.jobs[s.skip.runJob[k]]
	if vj.project != j.project {
		vp, jp := s.projects[vj.project], s.projects[j.project]
		return atLeast(sched.ProjectStanding(&s.policy, vp.name, vp.usage, vp.held-n),
			sched.ProjectStanding(&s.policy, jp.name, jp.usage, jp.held+need))
	}
	w, u := s.skip.runUser[k], s.users[j.user]
	return atLeast(sched.UserStanding(&s.policy, w.name, w.usage, w.held-n),
		sched.UserStanding(&s.policy, u.name, u.usage, u.held+need))
}

// atLeast reports whether a >= b, or a and b are equal but for rounding.
func atLeast(a, b float64) bool { return a >= b || nearTie(a, b) }

// nearTie reports whether a and b are equal but for rounding.
func nearTie(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b))
}

// triedJobs returns the queued jobs a cycle with no start would look for
// victims for, or more: under the static policies the first of the one
// lane; under fair_share the first of each lane in the walk's order
// (projects, then users, by standing), until the tries are used up, and
// the lanes tied with those.
func (s *sim) triedJobs() []int {
	t := preemptTries
	if !s.policy.Backfill {
		t = 1
	}
	s.skip.tried = s.skip.tried[:0]
	if s.policy.Name != sched.PolicyFairShare {
		l := s.lanes[0]
		return append(s.skip.tried, l.jobs[:min(t, len(l.jobs))]...)
	}
	ls := s.skip.lanes[:0]
	for _, l := range s.lanes {
		if len(l.jobs) == 0 {
			continue
		}
		s.user(l.user) // books of those who hold no GPUs, too
		s.project(l.project)
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *lane) int {
		if a.project != b.project {
			if a.project.standing != b.project.standing {
				if a.project.standing < b.project.standing {
					return -1
				}
				return 1
			}
			return strings.Compare(a.project.name, b.project.name)
		}
		if a.user.standing != b.user.standing {
			if a.user.standing < b.user.standing {
				return -1
			}
			return 1
		}
		return strings.Compare(a.user.name, b.user.name)
	})
	s.skip.lanes = ls
	taken := 0
	var last *lane
	for _, l := range ls {
		if taken >= t && !(nearTie(l.project.standing, last.project.standing) ||
			l.project == last.project && nearTie(l.user.standing, last.user.standing)) {
			break
		}
		n := min(t, len(l.jobs))
		s.skip.tried = append(s.skip.tried, l.jobs[:n]...)
		taken += n
		last = l
	}
	return s.skip.tried
}

// roomFor reports whether preempting the running jobs that queued job i
// may take (see couldPreempt) would make room for it on enough nodes.
func (s *sim) roomFor(i int) bool {
	j, q := &s.jobs[i], &s.qjob[i]
	fair := s.policy.Name == sched.PolicyFairShare
	if !fair && q.Priority <= s.skip.lowest {
		return false // no job it could take
	}
	u := s.user(s.users[j.user])
	if fair {
		s.project(s.projects[j.project])
	}
	need := j.gpus * j.nodes
	s.skip.room = append(s.skip.room[:0], s.nfree...)
	nodes := 0
	for _, f := range s.nfree {
		if f >= j.gpus {
			nodes++
		}
	}
	for k := range s.running {
		r, w := &s.running[k], s.skip.runUser[k]
		if r.Priority > q.Priority || !s.skip.open[k] {
			continue
		}
		own := w == u
		switch {
		case own && (r.Priority == q.Priority || s.jobs[s.skip.runJob[k]].project != j.project):
			continue // a user's job yields only to their higher-priority one in its project
		case r.Priority < q.Priority:
			if !fair || own {
				v := sched.Job{ID: r.ID, SubmittedAt: r.SubmittedAt, Priority: r.Priority, Estimate: r.Estimate}
				if !r.SubmittedAt.IsZero() && sched.CompareQueued(&v, q, s.policy) < 0 {
					continue // it would come straight back first
				}
			}
		case !fair || w.held <= u.held+need || !atLeast(w.standing, u.standing):
			continue
		}
		if fair && !own && !s.staysBehind(r, k, j, need) {
			continue
		}
		for _, pl := range r.Placements {
			n := s.nodeAt[pl.NodeID]
			before := s.skip.room[n]
			s.skip.room[n] += len(pl.GPUs)
			if before < j.gpus && s.skip.room[n] >= j.gpus {
				if nodes++; nodes >= j.nodes {
					return true
				}
			}
		}
	}
	return false
}
