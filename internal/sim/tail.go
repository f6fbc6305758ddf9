package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/sched"
)

// Long jobs at the tail (sched's tail.go): under fair_share the core
// serves first every job whose estimate is at least the backlog, and the
// backlog counts the whole queue. So a windowed cycle tells the core the
// work of the jobs it leaves out (Snapshot.LeftOutWork), and hands it
// every job on the tail, as it does every starving job. The queue's work
// and its jobs by estimate are kept as jobs come and go: a queued job's
// estimate does not change while it waits, but with absent estimates,
// which give none (sched.WorkOf is then 0).

// tailBook is the queue's estimated work and its jobs with work, the
// longest estimate first.
type tailBook struct {
	work  int64
	byEst []int
}

func (s *sim) estCmp(a, b int) int {
	if c := cmp.Compare(s.qjob[b].Estimate, s.qjob[a].Estimate); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// tailAdd counts queued job i in the book.
func (s *sim) tailAdd(i int) {
	w := sched.WorkOf(&s.qjob[i])
	if w == 0 {
		return
	}
	s.tail.work += w
	at, _ := slices.BinarySearchFunc(s.tail.byEst, i, s.estCmp)
	s.tail.byEst = slices.Insert(s.tail.byEst, at, i)
}

// tailRemove takes job i, leaving the queue, out of the book.
func (s *sim) tailRemove(i int) {
	w := sched.WorkOf(&s.qjob[i])
	if w == 0 {
		return
	}
	s.tail.work -= w
	if at, ok := slices.BinarySearchFunc(s.tail.byEst, i, s.estCmp); ok {
		s.tail.byEst = slices.Delete(s.tail.byEst, at, at+1)
	}
}

// tailCut is the core's sched.TailCut for the whole queue now.
func (s *sim) tailCut() (time.Duration, bool) {
	return sched.TailCut(&sched.Snapshot{Now: s.now, Nodes: s.nodes, Running: s.running, Policy: s.policy, LeftOutWork: s.tail.work})
}

// mayTail reports whether some queued job is on the tail now.
func (s *sim) mayTail() bool {
	cut, ok := s.tailCut()
	return ok && len(s.tail.byEst) > 0 && s.anyOnTail(cut)
}

// addTail adds to the lanes' extra jobs every job on the tail past the
// first w of its lane.
func (s *sim) addTail(w int) {
	cut, ok := s.tailCut()
	if !ok {
		return
	}
	for _, i := range s.tail.byEst {
		if s.qjob[i].Estimate < cut {
			return
		}
		if !sched.OnTail(&s.qjob[i], cut, s.now, &s.policy) {
			continue
		}
		l := s.laneFor(i)
		if p, found := slices.BinarySearchFunc(l.jobs, i, s.cmp); found && p >= w && !hasExtra(l.extra, p) {
			l.extra = mergeSorted(l.extra, []int{p})
		}
	}
}

// leftOutWork is the work of the queued jobs not in s.queue.
func (s *sim) leftOutWork() int64 {
	w := s.tail.work
	for k := range s.queue {
		w -= sched.WorkOf(&s.queue[k])
	}
	return w
}

// anyOnTail reports whether some queued job is on the tail at cut.
func (s *sim) anyOnTail(cut time.Duration) bool {
	for _, i := range s.tail.byEst {
		if s.qjob[i].Estimate < cut {
			return false
		}
		if sched.OnTail(&s.qjob[i], cut, s.now, &s.policy) {
			return true
		}
	}
	return false
}
