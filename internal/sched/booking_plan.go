package sched

import (
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
		if tl.bk.startAt[i] < end && tl.bk.endAt[i] > t && !member(tl.bk.list[i], j.User, j.Reservation) {
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

// bookingStart is when a job of a booking may start at the earliest, for
// EstimateStarts: its window's start, or now within it; false when the
// booking is not in effect or the job may not use it.
func (bk *bookings) bookingStart(j *Job, now time.Time) (time.Time, bool) {
	if bk == nil {
		return time.Time{}, false
	}
	i, ok := bk.byName[j.Reservation]
	if !ok {
		return time.Time{}, false
	}
	b := bk.list[i]
	if b.Maint || !slices.Contains(b.Users, j.User) || !now.Before(b.End) {
		return time.Time{}, false
	}
	if now.Before(b.Start) {
		return b.Start, true
	}
	return now, true
}
