package sched

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// never is the free-at time of a GPU no estimate frees (held outside
// Corral, or busy with no running job the core knows).
var never = time.Unix(1<<62, 0)

// timeline says when each GPU is expected to be free: now if free, else
// when its job is expected to end (start + estimate; at once if the job
// has outrun its estimate or is being preempted). Times are kept as
// nanoseconds after the cycle's now (see rel), which sort and compare
// far faster than time.Time; earliest turns them back into times.
type timeline struct {
	now     time.Time
	freeAt  [][]int64 // by node position, then GPU position
	sorted  [][]int64 // per node, its finite free-at times in order, unless stale
	stale   []bool
	bk      *bookings // the bookings to plan around (booking_plan.go); nil: none
	scratch []int64
}

// neverRel is never on the timeline: a GPU no estimate frees.
const neverRel = math.MaxInt64

// rel is t as nanoseconds after now: exact within 292 years of now,
// beyond that saturated, and never finite times saturate to neverRel.
func rel(t, now time.Time) int64 {
	if t.Equal(never) {
		return neverRel
	}
	return min(int64(t.Sub(now)), neverRel-1)
}

// addRel is a + d, saturated short of neverRel.
func addRel(a int64, d time.Duration) int64 {
	b := int64(d)
	switch {
	case b > 0 && a > neverRel-1-b:
		return neverRel - 1
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// timeOf turns a timeline time back into a time.Time.
func (tl *timeline) timeOf(r int64) time.Time {
	if r == neverRel {
		return never
	}
	return tl.now.Add(time.Duration(r))
}

// newTimeline builds the timeline of the running jobs. placedOn, when not
// nil, is the node position of every running job's placements in order
// (-1: not a node of the index), to spare looking them up.
func newTimeline(ix *index, running []Running, placedOn []int32, now time.Time) *timeline {
	tl := &timeline{now: now, freeAt: make([][]int64, len(ix.nodes)), sorted: make([][]int64, len(ix.nodes)),
		stale: make([]bool, len(ix.nodes))}
	gpus := 0
	for n := range ix.nodes {
		gpus += len(ix.nodes[n].free)
	}
	// One allocation for every node's free-at times and sorted times.
	slab := make([]int64, 2*gpus)
	slab, sorted := slab[:gpus:gpus], slab[gpus:]
	for n := range ix.nodes {
		ns := &ix.nodes[n]
		k := len(ns.free)
		row := slab[:k:k]
		slab = slab[k:]
		tl.sorted[n], sorted = sorted[:0:k], sorted[k:]
		tl.stale[n] = true
		for g := range row {
			if ns.free[g] {
				row[g] = 0
			} else {
				row[g] = neverRel
			}
		}
		tl.freeAt[n] = row
	}
	k := 0
	for i := range running {
		r := &running[i]
		var end int64 // now
		if !r.Preempting {
			if end = addRel(int64(r.StartedAt.Sub(now)), r.Estimate); end < 0 {
				end = 0
			}
		}
		if placedOn == nil {
			tl.markRel(ix, r.Placements, end)
			continue
		}
		for _, p := range r.Placements {
			if n := placedOn[k]; n >= 0 {
				tl.markOn(ix, int(n), p.GPUs, end)
			}
			k++
		}
	}
	return tl
}

// mark sets the free-at time of the placements' GPUs.
func (tl *timeline) mark(ix *index, ps []Placement, at time.Time) {
	tl.markRel(ix, ps, rel(at, tl.now))
}

func (tl *timeline) markRel(ix *index, ps []Placement, at int64) {
	for _, p := range ps {
		if p.Part != nil {
			continue // a slice's or share's GPU is never free whole (gpushare.go)
		}
		if n, ok := ix.byID[p.NodeID]; ok {
			tl.markOn(ix, n, p.GPUs, at)
		}
	}
}

// markOn sets the free-at time of GPUs of node position n.
func (tl *timeline) markOn(ix *index, n int, gpus []int, at int64) {
	for _, idx := range gpus {
		if g, ok := ix.nodes[n].at(idx); ok {
			tl.freeAt[n][g] = at
		}
	}
	tl.stale[n] = true
}

// sortedAt returns node n's finite free-at times in order.
func (tl *timeline) sortedAt(n int) []int64 {
	if tl.stale[n] {
		tl.stale[n] = false
		ts := tl.sorted[n][:0]
		for _, at := range tl.freeAt[n] {
			if at != neverRel {
				ts = append(ts, at)
			}
		}
		slices.Sort(ts)
		tl.sorted[n] = ts
	}
	return tl.sorted[n]
}

// earliest finds when and where the job can start at the earliest: on each
// node, the time its j.GPUs-th earliest matching GPU frees; over nodes, the
// nodesWanted earliest. It returns false when no estimate frees enough.
func (tl *timeline) earliest(ix *index, j *Job) (time.Time, []Placement, bool) {
	want := nodesWanted(j)
	type cand struct {
		n  int
		at int64
	}
	var cands []cand // want > 1: every fitting node
	best := cand{-1, neverRel}
	var scratch [8]int64
	times := scratch[:0]
	for n := range ix.nodes {
		at, ok := tl.nodeTime(ix, n, j, &times)
		if !ok {
			continue
		}
		if want == 1 {
			if best.n < 0 || at < best.at {
				best = cand{n, at}
			}
			continue
		}
		cands = append(cands, cand{n, at})
	}
	if want == 1 {
		if best.n < 0 {
			return time.Time{}, nil, false
		}
		cands = []cand{best}
	} else {
		if len(cands) < want {
			return time.Time{}, nil, false
		}
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.at, b.at) })
		cands = cands[:want]
	}
	at := cands[want-1].at
	ps := make([]Placement, 0, want)
	for _, c := range cands {
		ns := &ix.nodes[c.n]
		type slot struct {
			idx int
			at  int64
		}
		var slots []slot
		booked := tl.bookedOn(ix, c.n)
		for g := range ns.node.GPUs {
			if matches(&ns.node.GPUs[g], j) && tl.freeAt[c.n][g] != neverRel && (!booked || tl.usable(ix, c.n, g, j, c.at)) {
				slots = append(slots, slot{ns.node.GPUs[g].Index, tl.freeAt[c.n][g]})
			}
		}
		slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.at, b.at) })
		p := Placement{NodeID: ns.node.ID, GPUs: make([]int, 0, j.GPUs)}
		for _, s := range slots[:j.GPUs] {
			p.GPUs = append(p.GPUs, s.idx)
		}
		slices.Sort(p.GPUs)
		ps = append(ps, p)
	}
	return tl.timeOf(at), ps, true
}

// nodeTime is when node n could start the job at the earliest: when its
// j.GPUs-th earliest matching GPU frees. times is scratch space.
func (tl *timeline) nodeTime(ix *index, n int, j *Job, times *[]int64) (int64, bool) {
	ns := &ix.nodes[n]
	switch {
	case !ns.node.Schedulable || !ix.labelsOK(n, j):
		return 0, false
	case j.GPUs == 0:
		return tl.nowOf(n), true
	case len(ns.node.GPUs) < j.GPUs:
		return 0, false
	case tl.bookedOn(ix, n):
		return tl.bookedNodeTime(ix, n, j) // booking_plan.go
	case ns.class >= 0:
		// All the node's GPUs are alike: they all match or none does.
		if !ix.classes[ns.class].matches(j) {
			return 0, false
		}
		if ts := tl.sortedAt(n); len(ts) >= j.GPUs {
			return ts[j.GPUs-1], true
		}
		return 0, false
	}
	ts := (*times)[:0]
	for g := range ns.node.GPUs {
		if matches(&ns.node.GPUs[g], j) && tl.freeAt[n][g] != neverRel {
			ts = append(ts, tl.freeAt[n][g])
		}
	}
	*times = ts
	if len(ts) < j.GPUs {
		return 0, false
	}
	slices.Sort(ts)
	return ts[j.GPUs-1], true
}

// nowOf is the earliest free-at time on a node (for GPU-less jobs: now).
func (tl *timeline) nowOf(n int) int64 {
	t := int64(neverRel)
	for _, at := range tl.freeAt[n] {
		t = min(t, at)
	}
	return t
}

// headReservation is the head job's claim on future GPUs: at At, on GPUs.
type headReservation struct {
	jobID string
	at    time.Time
	gpus  []Placement
	held  []Placement // the reserved GPUs that are free now, kept out of the index
}

// reserve computes the head job's reservation and takes its currently free
// GPUs out of the index, so that later jobs cannot use them unless they
// are sure to end by then.
func reserve(ix *index, tl *timeline, j *Job) (*headReservation, bool) {
	at, ps, ok := tl.earliest(ix, j)
	if !ok {
		return nil, false
	}
	r := &headReservation{jobID: j.ID, at: at, gpus: ps}
	for _, p := range ps {
		n := ix.byID[p.NodeID]
		held := Placement{NodeID: p.NodeID}
		for _, idx := range p.GPUs {
			if g, ok := ix.nodes[n].at(idx); ok && ix.nodes[n].avail(g) {
				held.GPUs = append(held.GPUs, idx)
			}
		}
		if len(held.GPUs) > 0 {
			r.held = append(r.held, held)
		}
	}
	ix.take(r.held)
	return r, true
}

// overlaps reports whether a placement uses any reserved GPU.
func (r *headReservation) overlaps(ps []Placement) bool {
	for _, p := range ps {
		for _, q := range r.gpus {
			if p.NodeID != q.NodeID {
				continue
			}
			for _, a := range p.GPUs {
				if slices.Contains(q.GPUs, a) {
					return true
				}
			}
		}
	}
	return false
}

// takeBack removes from the held GPUs those a short job now uses.
func (r *headReservation) takeBack(ix *index, used []Placement) {
	var still []Placement
	for _, h := range r.held {
		keep := Placement{NodeID: h.NodeID}
		for _, idx := range h.GPUs {
			usedNow := false
			for _, u := range used {
				if u.NodeID == h.NodeID && slices.Contains(u.GPUs, idx) {
					usedNow = true
				}
			}
			if !usedNow {
				keep.GPUs = append(keep.GPUs, idx)
			}
		}
		if len(keep.GPUs) > 0 {
			still = append(still, keep)
		}
	}
	r.held = still
	ix.take(r.held)
}
