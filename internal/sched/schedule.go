package sched

import (
	"fmt"
	"slices"
	"time"
)

// cycle is one run of Schedule: the snapshot, the working index of free
// GPUs, and what has been decided so far.
type cycle struct {
	s   *Snapshot
	p   *Policy
	now time.Time
	ix  *index
	tl  *timeline // built when first needed
	res *reservation
	out Result

	userGPUs, projectGPUs   map[string]int // GPUs held, this cycle's starts included (quotas)
	shareUser, shareProject map[string]int // the same for fair share: jobs being preempted count for their takers
	runningOn               [][]int        // node position -> running job positions
	victim, claimed         map[int]bool   // running job positions
	preemptTries            int
	startEst                []time.Duration // estimate of each start, by position
	fitsCache               map[shape]bool
	whyCache                map[shape]whyEntry
	noFit                   map[shape]int      // shape -> index version at which it did not fit
	resCache                map[shape]fitEntry // shape -> fits with the reserved GPUs, at a version
	byPrio                  [][5]int           // node -> preemptable GPUs by priority (see countVictimGPUs)
	borrowedOn              []int              // node -> preemptable borrowed GPUs
}

type whyEntry struct {
	version int
	why     string
}

// whyNoFit is ix.whyNoFit, remembered per job shape while the free GPUs
// stay the same.
func (c *cycle) whyNoFit(j *Job) string {
	k := shapeOf(j)
	if e, ok := c.whyCache[k]; ok && e.version == c.ix.version {
		return e.why
	}
	why := c.ix.whyNoFit(j)
	c.whyCache[k] = whyEntry{c.ix.version, why}
	return why
}

// shape is what fitsEmpty depends on.
type shape struct {
	gpus, nodes int
	mem         int64
	typ         string
	labels      string // the job's node labels, flattened
}

// shapeOf is what placement depends on, as a map key.
func shapeOf(j *Job) shape {
	k := shape{gpus: j.GPUs, nodes: nodesWanted(j), mem: j.MinMemoryMiB, typ: j.GPUType}
	if len(j.NodeLabels) > 0 {
		keys := make([]string, 0, len(j.NodeLabels))
		for key := range j.NodeLabels {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			k.labels += key + "=" + j.NodeLabels[key] + "\x00"
		}
	}
	return k
}

// Schedule runs one cycle over the snapshot and returns its decisions.
func Schedule(s Snapshot) Result {
	p := s.Policy.WithDefaults()
	c := &cycle{s: &s, p: &p, now: s.Now, ix: newIndex(s.Nodes),
		victim: map[int]bool{}, claimed: map[int]bool{}, fitsCache: map[shape]bool{}, whyCache: map[shape]whyEntry{}, noFit: map[shape]int{}, resCache: map[shape]fitEntry{}}
	c.out.Pending = make([]Pending, 0, len(s.Queue))
	c.userGPUs, c.projectGPUs = holdings(s.Running)
	c.shareUser, c.shareProject = shareHoldings(s.Running)
	c.runningOn = make([][]int, len(s.Nodes))
	for ri := range s.Running {
		for _, pl := range s.Running[ri].Placements {
			if n, ok := c.ix.byID[pl.NodeID]; ok {
				c.runningOn[n] = append(c.runningOn[n], ri)
			}
		}
	}

	// 1. Walk the queue in the policy's order.
	w := newWalker(s.Queue, &p, s.Usage, c.shareUser, c.shareProject)
	var borrowers []*Job
	blocked := false // backfill off and the head waits: nothing passes it
	behind := ""
	for j, ok := w.next(); ok; j, ok = w.next() {
		switch {
		case blocked:
			c.pend(Pending{JobID: j.ID, Reason: ReasonBehindHead, Message: behind})
		case j.NotBefore.After(c.now):
			c.pend(Pending{JobID: j.ID, Reason: ReasonBackoff, EstimatedStart: j.NotBefore,
				Message: fmt.Sprintf("requeued after a loss; it may start again at %s", clock(j.NotBefore, c.now))})
		case c.overQuota(j) != "":
			borrowers = append(borrowers, j) // 2. deferred: it may borrow idle GPUs
		case c.start(j, false):
			w.placed(j)
		default:
			if c.wait(j, false) {
				w.placed(j) // GPUs are being freed for it
			} else if c.res != nil && c.res.jobID == j.ID && !p.Backfill {
				blocked = true
				behind = "waiting behind job " + j.ID + ", which is first in line (backfill is off)"
			}
		}
	}
	// 3. Jobs over quota borrow what is left idle, never delaying the head.
	for _, j := range borrowers {
		switch {
		case blocked:
			c.pend(Pending{JobID: j.ID, Reason: ReasonBehindHead, Message: behind})
		case c.start(j, true):
		default:
			c.wait(j, true)
			// Say it is over quota rather than short of GPUs.
			if last := &c.out.Pending[len(c.out.Pending)-1]; last.JobID == j.ID && last.Reason == ReasonResources {
				last.Reason, last.Message = ReasonQuota, c.overQuota(j)+"; no idle GPUs to borrow"
			}
		}
	}
	if c.res != nil {
		c.out.Head, c.out.ReservedAt, c.out.Held = c.res.jobID, c.res.at, c.res.held
	}
	return c.out
}

func (c *cycle) pend(p Pending) {
	p.Position = len(c.out.Pending) + 1
	c.out.Pending = append(c.out.Pending, p)
}

// overQuota says how the job would take its user or project past a quota
// ("" when it would not).
func (c *cycle) overQuota(j *Job) string {
	n := j.GPUs * nodesWanted(j)
	if q, ok := c.p.UserQuotas[j.User]; ok && c.userGPUs[j.User]+n > q {
		return fmt.Sprintf("user %s over quota: %d of %d GPUs in use", j.User, c.userGPUs[j.User], q)
	}
	if q, ok := c.p.ProjectQuotas[j.Project]; ok && c.projectGPUs[j.Project]+n > q {
		return fmt.Sprintf("project %s over quota: %d of %d GPUs in use", j.Project, c.projectGPUs[j.Project], q)
	}
	return ""
}

// fits reports whether the job could ever run on this cluster.
func (c *cycle) fits(j *Job) bool {
	k := shapeOf(j)
	v, ok := c.fitsCache[k]
	if !ok {
		v = c.ix.fitsEmpty(j)
		c.fitsCache[k] = v
	}
	return v
}

// start places the job now if it can without delaying the head job's
// reservation, and records the start.
func (c *cycle) start(j *Job, borrowed bool) bool {
	k := shapeOf(j)
	var ps []Placement
	ok := false
	if v, seen := c.noFit[k]; !seen || v != c.ix.version {
		if ps, ok = c.ix.find(j, c.p.Spread); !ok {
			c.noFit[k] = c.ix.version // the same shape will not fit until something changes
		}
	}
	if !ok && c.res != nil && c.res.jobID != j.ID && len(c.res.held) > 0 && c.p.Backfill &&
		j.EstimateGiven && !c.now.Add(j.Estimate).After(c.res.at) {
		// A job sure to end before the reservation may use reserved GPUs.
		v0 := c.ix.version
		c.ix.give(c.res.held)
		ps, ok = c.ix.find(j, c.p.Spread)
		if ok {
			c.ix.take(ps)
			c.res.takeBack(c.ix, ps)
			c.record(j, ps, borrowed)
			return true
		}
		c.ix.take(c.res.held)
		c.ix.version = v0
	}
	if !ok {
		return false
	}
	c.ix.take(ps)
	c.record(j, ps, borrowed)
	return true
}

func (c *cycle) record(j *Job, ps []Placement, borrowed bool) {
	c.out.Starts = append(c.out.Starts, Start{JobID: j.ID, Placements: ps, Borrowed: borrowed})
	c.startEst = append(c.startEst, j.Estimate)
	n := j.GPUs * nodesWanted(j)
	c.userGPUs[j.User] += n
	c.projectGPUs[j.Project] += n
	c.shareUser[j.User] += n
	c.shareProject[j.Project] += n
	if c.tl != nil {
		c.tl.mark(c.ix, ps, c.now.Add(j.Estimate))
	}
}

// wait handles a job that does not fit now: unsatisfiable, preempt for it,
// make it the head with a reservation, or leave it waiting. It returns
// true when GPUs are being freed for the job.
func (c *cycle) wait(j *Job, borrowing bool) bool {
	if !c.ix.anySchedulable() {
		c.pend(Pending{JobID: j.ID, Reason: ReasonNoNodes, Message: c.ix.whyNoFit(j)})
		return false
	}
	if !c.fits(j) {
		c.pend(Pending{JobID: j.ID, Reason: ReasonUnsatisfiable,
			Message: fmt.Sprintf("no node could ever run it: it needs %s on %d node(s)", describe(j), nodesWanted(j))})
		return false
	}
	why := c.whyNoFit(j)
	if !borrowing && c.preemptTries < maxPreemptTries {
		c.preemptTries++
		if plans, ok := c.planVictims(j, borrowing); ok {
			c.pend(c.preemptFor(j, borrowing, plans))
			return true
		}
	}
	if c.res == nil && !borrowing {
		if c.tl == nil {
			c.tl = newTimeline(c.ix, c.s.Running, c.now)
			for i, st := range c.out.Starts {
				c.tl.mark(c.ix, st.Placements, c.now.Add(c.startEst[i]))
			}
		}
		if r, ok := reserve(c.ix, c.tl, j); ok {
			c.res = r
			c.pend(Pending{JobID: j.ID, Reason: ReasonResources, Message: why, EstimatedStart: r.at})
			return false
		}
		// No estimate frees enough: the first waiting job still blocks
		// others when backfill is off.
		c.res = &reservation{jobID: j.ID, at: never}
		c.pend(Pending{JobID: j.ID, Reason: ReasonResources, Message: why})
		return false
	}
	if c.res != nil && !borrowing && c.couldUseReserved(j) {
		c.pend(Pending{JobID: j.ID, Reason: ReasonReservation, Message: fmt.Sprintf(
			"it would fit, but job %s holds a reservation until %s%s", c.res.jobID, clock(c.res.at, c.now), c.backfillHint(j))})
		return false
	}
	c.pend(Pending{JobID: j.ID, Reason: ReasonResources, Message: why})
	return false
}

// couldUseReserved reports whether the job would fit if the GPUs held for
// the head job were free.
func (c *cycle) couldUseReserved(j *Job) bool {
	if len(c.res.held) == 0 {
		return false
	}
	v := c.ix.version
	k := shapeOf(j)
	if e, ok := c.resCache[k]; ok && e.version == v {
		return e.ok
	}
	c.ix.give(c.res.held)
	_, ok := c.ix.find(j, c.p.Spread)
	c.ix.take(c.res.held)
	c.ix.version = v // the same GPUs are free as before
	c.resCache[k] = fitEntry{v, ok}
	return ok
}

type fitEntry struct {
	version int
	ok      bool
}

func (c *cycle) backfillHint(j *Job) string {
	switch {
	case !c.p.Backfill:
		return ""
	case !j.EstimateGiven:
		return "; give it an estimated_duration to let it backfill"
	}
	return fmt.Sprintf("; its estimate (%s) runs past it", j.Estimate.Round(time.Second))
}

// clock formats a reservation time for people: "14:02 UTC", or with the
// date when it is not within a day.
func clock(t, now time.Time) string {
	if t.Equal(never) {
		return "an unknown time"
	}
	t = t.UTC()
	if t.Sub(now) < 20*time.Hour {
		return t.Format("15:04 MST")
	}
	return t.Format("Jan 2 15:04 MST")
}
