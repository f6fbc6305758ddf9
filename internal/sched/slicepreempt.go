package sched

import "fmt"

// Slices as preemption victims: with the policy's Preemption on, a MIG
// slice job that finds no free slice may preempt one running slice job of
// lower priority holding a slice that fits it (the same profile, or for
// "any" one with its memory), on a node and GPU its filters allow. Only
// that slice is freed; the job waits (preempting) and takes it once the
// victim has stopped. A slice already being freed is claimed before
// another victim is chosen, so a waiting job preempts one slice, once.
// Slices are never preempted for whole-GPU jobs, and shares never are.

// mayPreemptSlice reports whether j is a slice job that might preempt a
// running slice: what did not fit for a job of its key may still make
// room for it (its priority is not in the key).
func (c *cycle) mayPreemptSlice(j *Job) bool {
	return c.p.Preemption && j.MIGProfile != "" && len(c.partRunning) > 0
}

// preemptSlice looks for the slice job j may preempt, or a slice being
// freed it may wait for; where it finds one, j waits preempting and it
// returns true.
func (c *cycle) preemptSlice(j *Job) bool {
	if !c.mayPreemptSlice(j) {
		return false
	}
	if c.sliceClaimed == nil {
		c.sliceClaimed = make(map[int]bool, 4)
	}
	cut := c.now.Add(-c.p.MinRunTime)
	best, stopping := -1, -1
	for i := range c.partRunning {
		r := &c.partRunning[i]
		if c.sliceClaimed[i] || !c.sliceSuits(r, j) {
			continue
		}
		if r.Preempting {
			stopping = i
			break
		}
		if r.StartedAt.After(cut) || Protected(r.Class) || r.Priority >= j.Priority || c.requeuedAhead(r, j, false) {
			continue
		}
		if best < 0 || betterSliceVictim(r, &c.partRunning[best]) {
			best = i
		}
	}
	switch {
	case stopping >= 0:
		c.sliceClaimed[stopping] = true
		c.pend(Pending{JobID: j.ID, Reason: ReasonPreempting, note: textNote("waiting for a MIG slice being freed by a preempted job")})
		return true
	case best < 0:
		return false
	}
	r := &c.partRunning[best]
	e := Equivalents(r.Placements)
	if q := c.overQuotaBy(j, e); q != "" {
		return false // startPart says why it waits
	}
	c.sliceClaimed[best] = true
	msg := fmt.Sprintf("preempted for job %s (%s)", j.ID, preemptWhy(ReasonPreempted, r, j))
	c.out.Preemptions = append(c.out.Preemptions, Preemption{JobID: r.ID, ForJob: j.ID, Reason: ReasonPreempted, Message: msg})
	// The slice now counts for the job that takes it, as a whole victim's
	// GPUs do (preemptFor).
	c.shareUser[r.User] -= e
	c.shareProject[r.Project] -= e
	c.shareUser[j.User] += e
	c.shareProject[j.Project] += e
	c.pend(Pending{JobID: j.ID, Reason: ReasonPreempting, note: textNote("preempting " + r.ID + " to make room")})
	return true
}

// betterSliceVictim reports whether a is a better victim than b: lower
// priority, then the later started (less work lost), then by id.
func betterSliceVictim(a, b *Running) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if !a.StartedAt.Equal(b.StartedAt) {
		return a.StartedAt.After(b.StartedAt)
	}
	return a.ID < b.ID
}

// sliceSuits reports whether running job r holds one MIG slice that j
// could run on: one that fits j (sliceFits), of a GPU j's type filter
// allows, on a schedulable node with j's labels.
func (c *cycle) sliceSuits(r *Running, j *Job) bool {
	if len(r.Placements) != 1 {
		return false
	}
	p := &r.Placements[0]
	if p.Part == nil || p.Part.MIG < 0 || len(p.GPUs) != 1 {
		return false
	}
	n, ok := c.ix.byID[p.NodeID]
	if !ok {
		return false
	}
	ns := &c.ix.nodes[n]
	g, ok := ns.at(p.GPUs[0])
	if !ok || !c.ix.partOK(n, g, j) {
		return false
	}
	gpu := &ns.node.GPUs[g]
	for si := range gpu.MIG {
		if sl := &gpu.MIG[si]; sl.Index == p.Part.MIG {
			return sliceFits(sl, j)
		}
	}
	return false
}
