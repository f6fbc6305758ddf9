package sched

import (
	"cmp"
	"slices"
	"time"
)

// Bookings on the timeline: a GPU a booking keeps from a job (see blocks)
// is usable by it from its free-at time only over an interval that does
// not meet the booking's window. The head's reservation and the start
// estimates (EstimateStarts) are so planned around bookings.

// bookedOn reports whether node n has bookings the timeline must weigh.
func (tl *timeline) bookedOn(ix *index, n int) bool {
	return tl.bk != nil && tl.bk.onPos[n] != nil
}

// usable reports whether GPU position g of node n is free for job j over
// [t, t+runFor(j)) (t on the timeline, relative to now).
func (tl *timeline) usable(ix *index, n, g int, j *Job, t int64) bool {
	if tl.freeAt[n][g] > t || tl.freeAt[n][g] == neverRel {
		return false
	}
	if !tl.bookedOn(ix, n) {
		return true
	}
	end := max(addRel(t, runFor(j)), t+1)
	for _, i := range tl.bk.onPos[n][g] {
		if tl.bk.startAt[i] < end && tl.bk.endAt[i] > t && !member(tl.bk.list[i], j.User, j.Booking) {
			return false
		}
	}
	return true
}

// bookedNodeTime is nodeTime for a node with bookings: the first of the
// GPUs' free-at times and the bookings' ends at which j.GPUs matching
// GPUs are usable for the job's whole run.
func (tl *timeline) bookedNodeTime(ix *index, n int, j *Job) (int64, bool) {
	ns := &ix.nodes[n]
	ts := tl.scratch[:0]
	defer func() { tl.scratch = ts[:0] }()
	for g := range ns.node.GPUs {
		if at := tl.freeAt[n][g]; at != neverRel && matches(&ns.node.GPUs[g], j) {
			ts = append(ts, at)
		}
	}
	for _, i := range tl.bk.nodes[ns.node.ID] {
		if e := tl.bk.endAt[i]; e > 0 {
			ts = append(ts, e)
		}
	}
	slices.Sort(ts)
	for _, t := range slices.Compact(ts) {
		k := 0
		for g := range ns.node.GPUs {
			if matches(&ns.node.GPUs[g], j) && tl.usable(ix, n, g, j, t) {
				k++
			}
		}
		if k >= j.GPUs {
			return t, true
		}
	}
	return 0, false
}

// bookedEarliest is when and where a job of a booking may start at the
// earliest, for EstimateStarts: on the booking's GPUs, from its window's
// start (or now, within it), when j.GPUs of them on each of its nodes
// are free; false when the booking is not in effect, the job may not use
// it, or its GPUs are too few.
func (tl *timeline) bookedEarliest(ix *index, j *Job) (time.Time, []Placement, bool) {
	bk := tl.bk
	if bk == nil {
		return time.Time{}, nil, false
	}
	i, ok := bk.byName[j.Booking]
	if !ok {
		return time.Time{}, nil, false
	}
	b := bk.list[i]
	if b.Maint || !slices.Contains(b.Users, j.User) || bk.endAt[i] <= 0 {
		return time.Time{}, nil, false
	}
	type cand struct {
		at int64
		p  Placement
	}
	var cands []cand
	gs := bk.gpus[i]
	for k := 0; k < len(gs); {
		n := gs[k].n
		type slot struct {
			idx int
			at  int64
		}
		var slots []slot
		for ; k < len(gs) && gs[k].n == n; k++ {
			g := int(gs[k].g)
			gpu := &ix.nodes[n].node.GPUs[g]
			if at := tl.freeAt[n][g]; at != neverRel && matches(gpu, j) {
				slots = append(slots, slot{gpu.Index, at})
			}
		}
		if !ix.nodes[n].node.Schedulable || !ix.labelsOK(int(n), j) || len(slots) < j.GPUs {
			continue
		}
		slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.at, b.at) })
		c := cand{at: max(bk.startAt[i], 0), p: Placement{NodeID: ix.nodes[n].node.ID, GPUs: []int{}}}
		for _, s := range slots[:j.GPUs] {
			c.at = max(c.at, s.at)
			c.p.GPUs = append(c.p.GPUs, s.idx)
		}
		cands = append(cands, c)
	}
	want := nodesWanted(j)
	if len(cands) < want {
		return time.Time{}, nil, false
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.at, b.at) })
	ps := make([]Placement, 0, want)
	for _, c := range cands[:want] {
		ps = append(ps, c.p)
	}
	return tl.timeOf(cands[want-1].at), ps, true
}
