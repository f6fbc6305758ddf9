package sim

import (
	"math"
	"slices"
	"time"

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
// jobs left out could not have changed any decision. Otherwise it hands
// the core, with the same head, the few left-out jobs that might have
// (widen), and judges again; after a few tries, or when the result cannot
// tell, it runs the cycle on four times the window (grow), up to the whole
// queue. The decisions are those of a cycle over the whole queue, always
// (TestWindowedIsExact checks it on random traces, with and without
// backfill and preemption); only the cost changes.
//
// The queue is kept in lanes, each in the core's own order
// (sched.CompareQueued): one lane under a static policy (fcfs, sjf,
// priority), one per project and user under fair_share, whose walker takes
// each user's jobs in that order while users take turns. The window is the
// first w jobs of every lane, plus the lane's extra jobs.
//
// Why a result can be accepted. The core walks a lane's jobs in order, and
// a job it does not start changes nothing the walk depends on (fair
// share's turns move only when a job is placed), so the walk over the
// jobs handed to the core is the walk over the whole queue with the
// left-out jobs taken out, as long as each left-out job, at its turn,
// would neither have started, nor become the head (a reservation already
// stands: the head was tried before it), nor looked for victims to
// preempt (the cycle's four preemption tries were used by jobs tried
// before it). A left-out job starts only on nodes with its GPUs free
// outside the head's reservation or, ending before the reservation, with
// its GPUs free counting the reserved ones, and free GPUs only get fewer
// as a cycle goes on. judgeLane and judgeLanes bound those GPUs; with
// backfill off (judgeBlocked) every job after the head waits behind it.
// Quotas (borrowing) and idle-job preemption are other ways a waiting job
// acts: with them, and with sjf on learned estimates (whose order moves
// under the lanes), every cycle sees the whole queue.

// firstWindow is the first window tried. Most cycles start a few jobs,
// and a cycle that needs more widens or grows: small windows make cheap
// cycles (on the shared trace, 16 to 256 cost the same within noise).
const firstWindow = 16

type lane struct {
	jobs []int // queued jobs, in the core's order
	// extra: this cycle, positions in jobs past the window that the core
	// is handed as well, ascending (see widen).
	extra []int
	// fair_share: the lane's user and project (see skip.go)
	user    *userBook
	project *projectBook
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
		l := &lane{}
		if s.policy.Name == sched.PolicyFairShare {
			l.user, l.project = s.users[s.jobs[i].user], s.projects[s.jobs[i].project]
		}
		s.lanes = append(s.lanes, l)
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

// buildQueue fills s.queue with the first w jobs of every lane and the
// lane's extra jobs, with their current estimates, and reports whether
// that is the whole queue. Every job that may be starving (it has waited
// sched.StarveFloor) is one of the extra jobs: the core tries them before any other, so none may be
// left out.
func (s *sim) buildQueue(w int) bool {
	s.queue = s.queue[:0]
	whole := true
	head := -1
	if sched.OldestHead(&s.policy) {
		head = s.oldestHead()
	}
	var newest time.Time // the newest submission that may starve
	starve := false
	if w < math.MaxInt {
		s.addTail(w) // tail.go
		newest, starve = s.starveNewest()
	}
	for _, l := range s.lanes {
		n := len(l.jobs)
		if n > w {
			n, whole = w, false
			if starve {
				s.addStarving(l, w, newest)
			}
			if head >= 0 && s.laneFor(head) == l {
				if p, _ := slices.BinarySearchFunc(l.jobs, head, s.cmp); p >= w && !hasExtra(l.extra, p) {
					l.extra = mergeSorted(l.extra, []int{p})
				}
			}
		}
		for _, i := range l.jobs[:n] {
			s.queueJob(i)
		}
		for _, p := range l.extra {
			s.queueJob(l.jobs[p])
		}
	}
	return whole
}

func (s *sim) queueJob(i int) {
	q := &s.qjob[i]
	if s.cfg.Estimates == EstimatesAbsent {
		q.Estimate, q.EstimateGiven = sched.EstimateFor(s.jobs[i].given, s.jobs[i].t.User, s.estimator, s.policy.DefaultEstimate)
		q.NoEstimate = s.noEstimate(i)
	}
	if s.relearn { // cycle
		q.Estimate, q.EstimateGiven = s.relearnedEstimate(i)
		q.NoEstimate = !q.EstimateGiven
	}
	s.queue = append(s.queue, *q)
}

// starveCut returns the largest aged-priority key (sched.CompareQueued's
// under fair_share, in UnixNano) a starving job can have, and false when
// no job can starve now. Lanes are in key order, so a lane's starving jobs
// are among its first ones up to that key.
func (s *sim) starveCut() (int64, bool) {
	newest, ok := s.starveNewest()
	if !ok {
		return 0, false
	}
	return newest.Add(-time.Duration(s.minPrio) * s.policy.AgingInterval).UnixNano(), true
}

// starveNewest is the newest submission that may starve now (the core's
// sched.StarveFloor for the whole queue), false when none can.
func (s *sim) starveNewest() (time.Time, bool) {
	floor, ok := sched.StarveFloor(&sched.Snapshot{Now: s.now, Nodes: s.nodes, Running: s.running, Policy: s.policy, LeftOutWork: s.tail.work})
	if !ok {
		return time.Time{}, false
	}
	return s.now.Add(-floor), true
}

// mayStarve reports whether some queued job may be starving (some lane's
// first job is within the cut-off).
func (s *sim) mayStarve() bool {
	cut, ok := s.starveCut()
	if !ok {
		return false
	}
	for _, l := range s.lanes {
		if len(l.jobs) > 0 && s.key(l.jobs[0]) <= cut {
			return true
		}
	}
	return false
}

// key is job i's aged-priority key, as the lanes are ordered.
func (s *sim) key(i int) int64 {
	q := &s.qjob[i]
	return q.SubmittedAt.Add(-time.Duration(q.Priority) * s.policy.AgingInterval).UnixNano()
}

// addStarving adds to the lane's extra jobs its jobs past the first w
// submitted at newest or before (those that may be starving).
func (s *sim) addStarving(l *lane, w int, newest time.Time) {
	cut := newest.Add(-time.Duration(s.minPrio) * s.policy.AgingInterval).UnixNano()
	var add []int
	for p := w; p < len(l.jobs) && s.key(l.jobs[p]) <= cut; p++ {
		if !s.qjob[l.jobs[p]].SubmittedAt.After(newest) && !hasExtra(l.extra, p) {
			add = append(add, p)
		}
	}
	if len(add) > 0 {
		l.extra = mergeSorted(l.extra, add)
	}
}

// shapeFor is the set of queued jobs of job i's shape.
func (s *sim) shapeFor(i int) *lane {
	k := [2]int{s.jobs[i].gpus, s.jobs[i].nodes}
	l := s.shapes[k]
	if l == nil {
		l = &lane{}
		s.shapes[k] = l
	}
	return l
}

// oldestHead returns the job the core makes the head before it walks the
// queue (sched.OldestHead): the first in the core's order of the queued
// jobs that cannot start on the free GPUs; -1: none. Every node is alike,
// so whether a job can start depends on its shape alone.
func (s *sim) oldestHead() int {
	s.cntFree = s.fitCounts(s.nfree, s.cntFree)
	head := -1
	for k, l := range s.shapes {
		if len(l.jobs) == 0 || fitsCount(s.cntFree, k[0], k[1]) {
			continue
		}
		if i := l.jobs[0]; head < 0 || s.cmp(i, head) < 0 {
			head = i
		}
	}
	return head
}

// What a windowed result says.
const (
	accept = iota // it is the whole queue's result
	widen         // some left-out jobs might change it: they were added to their lanes' extra
	grow          // the window is too small to tell
)

// maxWiden is how many times a cycle adds left-out jobs before it grows
// the window instead.
const maxWiden = 3

// judge says whether a cycle's result over the first w jobs of every lane
// (and the lanes' extra jobs) is the result over the whole queue (see the
// comment at the top), and otherwise what to hand the core next.
// widenings is how many times this cycle's window was widened already.
func (s *sim) judge(res sched.Result, w, widenings int) int {
	for _, st := range res.Starts {
		s.mark[s.index(st.JobID)] = true
	}
	for k, p := range res.Pending {
		s.pidx[s.index(p.JobID)] = int32(k + 1)
	}
	defer func() {
		for _, st := range res.Starts {
			s.mark[s.index(st.JobID)] = false
		}
		for _, p := range res.Pending {
			s.pidx[s.index(p.JobID)] = 0
		}
	}()
	switch {
	case !s.policy.Backfill:
		return s.judgeBlocked(res, w)
	case len(s.lanes) == 1 && s.policy.Name != sched.PolicyFairShare:
		return s.judgeLane(res, w, widenings)
	case res.Head == "":
		return grow // every job the core saw started (or is preempting): a left-out one could have become the head
	}
	return s.judgeLanes(res, w, widenings)
}

// triesUsedAt is the position in the result's Pending (walk order) from
// which the core's preemption tries (sched's maxPreemptTries, 4) are used
// up: every job that waits for GPUs (not behind the head, not
// unsatisfiable) uses one. A job tried after that looks for no victims,
// so a left-out job has no way to preempt. Without preemption nothing can
// be preempted (the simulator has no quotas, borrowed or idle jobs): 0.
func (s *sim) triesUsedAt(res sched.Result) int {
	if !s.policy.Preemption {
		return 0
	}
	n := 0
	for k, p := range res.Pending {
		switch p.Reason {
		case sched.ReasonResources, sched.ReasonBackfillReserved, sched.ReasonBooking, sched.ReasonPreempting:
			n++
		}
		if n == 4 {
			return k + 1
		}
	}
	return math.MaxInt
}

// judgeBlocked is judge with backfill off: once the head waits, every
// later job waits behind it. The result stands when the last windowed job
// of every lane came after the head (it is the head or waits behind it).
func (s *sim) judgeBlocked(res sched.Result, w int) int {
	for _, l := range s.lanes {
		if len(l.jobs) <= w {
			continue
		}
		last := l.jobs[w-1]
		if s.jobs[last].id == res.Head {
			continue
		}
		if k := s.pidx[last]; k == 0 || res.Pending[k-1].Reason != sched.ReasonBehindHead {
			return grow
		}
	}
	return accept
}

// fitCounts returns, for each GPU count g, how many nodes have at least g
// of the free GPUs given per node.
func (s *sim) fitCounts(free []int, out []int) []int {
	out = append(out[:0], make([]int, s.cfg.NodeGPUs+2)...)
	for _, f := range free {
		out[min(max(f, 0), s.cfg.NodeGPUs)]++
	}
	for g := s.cfg.NodeGPUs - 1; g >= 0; g-- {
		out[g] += out[g+1]
	}
	return out
}

// fitsCount reports whether a job of gpus x nodes could be placed given
// fitCounts' counts.
func fitsCount(counts []int, gpus, nodes int) bool {
	return gpus < len(counts) && counts[gpus] >= nodes
}

// endsBefore reports whether job i is sure to end before the reservation
// (so it may backfill onto reserved GPUs).
func (s *sim) endsBefore(i int, res sched.Result) bool {
	q := &s.qjob[i]
	return q.EstimateGiven && !s.now.Add(q.Estimate).After(res.ReservedAt)
}

// judgeLane is judge for a single lane (static policies), whose jobs the
// core walks in lane order: the left-out jobs past the last one handed to
// the core meet the GPUs as the cycle left them. One of them could start
// on nodes with its GPUs free outside the reservation or, ending before
// the reservation, with its GPUs free counting the reserved ones; if none
// can, the result stands. Else the first few that could are handed to the
// core too: the walk up to the last job it saw is the same, and the
// left-out jobs between them had no room even then.
func (s *sim) judgeLane(res sched.Result, w, widenings int) int {
	l := s.lanes[0]
	last := l.jobs[min(w, len(l.jobs))-1] // the window's last job
	if res.Head != "" && s.cmp(s.index(res.Head), last) > 0 {
		return grow // the head is not in the window: a left-out job before it would have been
	}
	// The window's waiting jobs come first in Pending.
	waiting := 0
	for _, p := range res.Pending {
		if s.cmp(s.index(p.JobID), last) > 0 {
			break
		}
		waiting++
	}
	if s.triesUsedAt(res) > waiting {
		return grow
	}
	free := s.scratchFree()
	for _, st := range res.Starts {
		for _, p := range st.Placements {
			free[s.nodeAt[p.NodeID]] -= len(p.GPUs)
		}
	}
	s.cntFree = s.fitCounts(free, s.cntFree) // counting reserved GPUs
	for _, p := range res.Held {
		free[s.nodeAt[p.NodeID]] -= len(p.GPUs)
	}
	s.cntOpen = s.fitCounts(free, s.cntOpen) // outside the reservation
	backfill := len(res.Held) > 0
	if res.Head == "" && len(l.extra) > 0 {
		return grow // (unreachable: the head is in the window, and extra jobs come after it)
	}
	from := w
	if len(l.extra) > 0 {
		from = l.extra[len(l.extra)-1] + 1
	}
	want := 8 << (2 * widenings)
	var add []int
	for p := from; p < len(l.jobs) && len(add) < want; p++ {
		i := l.jobs[p]
		j := &s.jobs[i]
		if fitsCount(s.cntOpen, j.gpus, j.nodes) || backfill && fitsCount(s.cntFree, j.gpus, j.nodes) && s.endsBefore(i, res) {
			add = append(add, p)
		}
	}
	switch {
	case len(add) == 0:
		return accept
	case widenings >= maxWiden || res.Head == "":
		return grow // without a head, a left-out job could become it
	}
	l.extra = append(l.extra, add...)
	return widen
}

// judgeLanes is judge for lanes whose turns interleave (fair_share). A
// left-out job j of lane L is tried after the jobs of L before it, and so
// after every job the core tried before the last of those (Pending is in
// walk order). If one of those, k (of any lane), asked at most j's GPUs
// per node on one node and did not start, then when k was tried no node
// had that many GPUs free outside the reservation, and free GPUs only get
// fewer as a cycle goes on; if the head was tried before k (the
// reservation stood) and the preemption tries were used up by then, j can
// start only by backfilling onto reserved GPUs. If such a k (not the
// head) was sure to end before the reservation, it tried that too, and
// found no node with that many free counting the reserved GPUs (or none
// were left to try): neither can j. Nor can j, tried after the head and
// the tries, start outside the reservation when no node had its GPUs free
// as the cycle began outside those still held for the head as it ended.
// Left-out jobs that cannot be ruled out
// so are handed to the core too, a few per lane, and the new result judged
// again (every left-out job again: the turns may have moved).
func (s *sim) judgeLanes(res sched.Result, w, widenings int) int {
	headAt := int(s.pidx[s.index(res.Head)]) - 1
	if headAt < 0 {
		return grow
	}
	from := max(headAt, s.triesUsedAt(res)) // jobs tried from here bound those after them
	// Could a left-out job backfill onto reserved GPUs? Only while some are
	// free, and only if it ends before the reservation.
	backfill := len(res.Held) > 0
	for _, st := range res.Starts {
		if s.endsBefore(s.index(st.JobID), res) {
			backfill = true // it may have used reserved GPUs that a left-out job would have found free
		}
	}
	// bounds[k-from]: the fewest GPUs per node a one-node job waiting at
	// Pending position from..k asked (bound), and the same among those
	// tried after the head that could have backfilled (bfBound).
	s.bounds = s.bounds[:0]
	bound, bfBound := math.MaxInt, math.MaxInt
	for k := from; k < len(res.Pending); k++ {
		i := s.index(res.Pending[k].JobID)
		if j := &s.jobs[i]; j.nodes == 1 {
			bound = min(bound, j.gpus)
			if k > headAt && s.endsBefore(i, res) {
				bfBound = min(bfBound, j.gpus)
			}
		}
		s.bounds = append(s.bounds, [2]int{bound, bfBound})
	}
	s.cntFree = s.fitCounts(s.nfree, s.cntFree)
	// A job tried after the head finds free outside the reservation at
	// most the GPUs free as the cycle began less those still held for the
	// head as it ended (the held GPUs only get fewer, and so do free ones).
	free := s.scratchFree()
	for _, p := range res.Held {
		free[s.nodeAt[p.NodeID]] -= len(p.GPUs)
	}
	s.cntOpen = s.fitCounts(free, s.cntOpen)
	want := 8 << (2 * widenings)
	widened := false
	for _, l := range s.lanes {
		if len(l.jobs) <= w+len(l.extra) {
			continue
		}
		last := -1 // the last Pending position of the lane's jobs handed to the core, so far
		var add []int
		e := 0 // next extra
		for p, i := range l.jobs {
			if p < w || e < len(l.extra) && l.extra[e] == p {
				if p >= w {
					e++
				}
				last = max(last, int(s.pidx[i])-1)
				continue
			}
			bound, bfBound := math.MaxInt, math.MaxInt
			if last >= from {
				bound, bfBound = s.bounds[last-from][0], s.bounds[last-from][1]
			}
			j := &s.jobs[i]
			open := j.gpus < bound && (last < from || fitsCount(s.cntOpen, j.gpus, j.nodes))
			if open || backfill && j.gpus < bfBound && fitsCount(s.cntFree, j.gpus, j.nodes) && s.endsBefore(i, res) {
				if len(add) == want {
					break
				}
				add = append(add, p)
			}
		}
		if len(add) > 0 {
			widened = true
			l.extra = mergeSorted(l.extra, add)
		}
	}
	switch {
	case !widened:
		return accept
	case widenings >= maxWiden:
		return grow
	}
	return widen
}

func mergeSorted(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// clearExtra forgets every lane's extra jobs.
func (s *sim) clearExtra() {
	for _, l := range s.lanes {
		l.extra = l.extra[:0]
	}
}

// scratchFree returns a copy of the free GPU counts per node.
func (s *sim) scratchFree() []int {
	s.free = append(s.free[:0], s.nfree...)
	return s.free
}

// hasExtra reports whether position p is among a lane's extra positions
// (ascending): a binary search, since a long queue may have thousands of
// starving jobs added one by one.
func hasExtra(extra []int, p int) bool {
	_, ok := slices.BinarySearch(extra, p)
	return ok
}
