package sched

import (
	"math"
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
	res *headReservation
	out Result
	// starveAfter: a job starves only once it has waited this long too
	// (the budget's after: StarveBacklog times the backlog; starve.go).
	starveAfter time.Duration
	// lightAfter: while light starving applies, a job that has waited this
	// long starves light (the budget's lightAfter); 0: it does not apply.
	lightAfter time.Duration

	userGPUs, projectGPUs   map[string]int     // GPUs held, this cycle's starts included (quotas)
	shareUser, shareProject map[string]float64 // the same in GPU-equivalents for fair share (a slice or share its fraction): jobs being preempted count for their takers
	runningOn               [][]int            // node position -> running job positions
	placedOn                []int32            // the node position (-1: none) of every running job's placements, in order
	victim, claimed         map[int]bool       // running job positions
	preemptTries            int
	mayPreempt              bool            // some waiting job could take GPUs from a running one (see wait)
	startEst                []time.Duration // estimate of each start, by position
	plain                   map[plainShape]*shapeState
	shapes                  map[shape]*shapeState
	resNote, behind         *noteSrc // shared by the notes of jobs kept out by the reservation, or behind the head
	byPrio                  [][5]int // node -> preemptable GPUs by priority (see prepVictims)
	borrowedOn              []int    // node -> preemptable borrowed GPUs
	// The victim search's (see tally, prepVictims): running position ->
	// user slot, and whether it may be preempted at all; per user slot,
	// for the job at hand (jUser, -1 when it holds nothing), whether
	// overShare.
	cands []int // scratch
	// What tally saw of the running jobs: some are being preempted; some
	// that may be preempted (not stopping, not protected) are borrowed or
	// idle; the lowest priority of the others (math.MaxInt: none).
	stopping, openSoft bool
	lowOpen            int
	runUser            []int32
	open               []bool
	userSlot           map[string]int32
	jUser              int32
	fairOK             []int8

	diskNote    *note // diskFullNote's, once made (disk.go)
	diskChecked bool

	left map[*Job]int // groups' jobs not yet decided (group.go)

	bk *bookings // the snapshot's bookings (booking.go); nil: none

	cpu *cpuJobs // running zero-GPU jobs by user (cpujobs.go); nil: no cap

	// GPU sharing (gpushare.go): the MIG and shared GPUs' working state,
	// made when the first slice or share job is considered; the running
	// jobs holding parts, kept out of s.Running.
	migParts     []partGPU // nil until the first slice or share job
	shareParts   []partGPU
	freeHist     []int // MIG GPUs by free slices
	partRunning  []Running
	partsVersion int                  // bumped by every part placed
	partMemo     map[partKey]partMemo // keys that did not fit, and why
	sliceClaimed map[int]bool         // partRunning positions a slice job preempts or waits for (slicepreempt.go)
	// GPU-equivalents the running and started slices and shares hold,
	// by user and project (quotas charge a part its fraction, quota.go).
	userParts, projectParts map[string]float64
}

// tally counts, in one pass over the running jobs, the GPUs each user
// and project holds: all of them (holdings, for quotas) and those of jobs
// not being preempted (shareHoldings, for fair share). It numbers the
// users on the way, and notes what the victim search may find (runUser,
// userSlot, open, stopping, openSoft, lowOpen).
func (c *cycle) tally() {
	rs := c.s.Running
	c.lowOpen = math.MaxInt
	cut := c.now.Add(-c.p.MinRunTime) // a job started after it is protected
	c.open = make([]bool, len(rs))
	c.runUser = make([]int32, len(rs))
	c.userSlot = make(map[string]int32, 16)
	projectSlot := make(map[string]int32, 8)
	type count struct {
		name    string
		held    int
		shared  float64
		sharing bool // some job not being preempted
	}
	var users, projects []count
	for ri := range rs {
		r := &rs[ri]
		n := gpuCount(r)
		k, ok := c.userSlot[r.User]
		if !ok {
			k = int32(len(users))
			c.userSlot[r.User] = k
			users = append(users, count{name: r.User})
		}
		c.runUser[ri] = k
		p, ok := projectSlot[r.Project]
		if !ok {
			p = int32(len(projects))
			projectSlot[r.Project] = p
			projects = append(projects, count{name: r.Project})
		}
		u, pr := &users[k], &projects[p]
		u.held += n
		pr.held += n
		if !r.Preempting {
			u.shared, u.sharing = u.shared+float64(n), true
			pr.shared, pr.sharing = pr.shared+float64(n), true
		}
		switch {
		case r.Preempting:
			c.stopping = true
		case r.StartedAt.After(cut):
		case Protected(r.Class): // never a victim (class.go)
		case r.Borrowed || r.Idle && c.p.PreemptIdle:
			c.open[ri], c.openSoft = true, true
		default:
			c.open[ri], c.lowOpen = true, min(c.lowOpen, r.Priority)
		}
	}
	fill := func(cs []count) (held map[string]int, shared map[string]float64) {
		held, shared = make(map[string]int, max(len(cs), 8)), make(map[string]float64, max(len(cs), 8))
		for _, c := range cs {
			held[c.name] = c.held
			if c.sharing {
				shared[c.name] = c.shared
			}
		}
		return held, shared
	}
	c.userGPUs, c.shareUser = fill(users)
	c.projectGPUs, c.shareProject = fill(projects)
}

// shapeState is what a cycle learned about one job shape: every job of a
// shape fits, or does not, the same GPUs. Versions are 1 + the index's
// version when it was learned; 0: not yet.
type shapeState struct {
	fits     int8     // could ever run (fitsEmpty): 0 not known yet, 1 yes, -1 no
	unsat    *noteSrc // why not, when it could never run
	noFitAt  int      // did not fit the free GPUs at this version
	whyAt    int      // why is why it did not fit, at this version
	why      *noteSrc
	resAt    int      // resOK is whether it fits with the reserved GPUs, at this version
	resOK    bool     //
	bookAt   int      // bookNote is why bookings keep it out, at this version (booking.go)
	bookNote *noteSrc //
}

// plainShape is the key of a shape with no GPU type and no node labels,
// cheaper to hash than shape.
type plainShape struct {
	gpus, nodes int
	mem         int64
}

// shape is what placement depends on, as a map key.
type shape struct {
	gpus, nodes int
	mem         int64
	typ         string
	labels      string // the job's node labels, flattened
}

// shapeOf returns what the cycle knows of the job's shape.
func (c *cycle) shapeOf(j *Job) *shapeState {
	if j.GPUType == "" && len(j.NodeLabels) == 0 {
		k := plainShape{gpus: j.GPUs, nodes: nodesWanted(j), mem: j.MinMemoryMiB}
		st := c.plain[k]
		if st == nil {
			st = &shapeState{}
			c.plain[k] = st
		}
		return st
	}
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
	st := c.shapes[k]
	if st == nil {
		st = &shapeState{}
		c.shapes[k] = st
	}
	return st
}

// whyNoFit is ix.noFit, remembered per job shape while the free GPUs stay
// the same.
func (c *cycle) whyNoFit(j *Job, sh *shapeState) *noteSrc {
	if sh.whyAt != c.ix.version+1 {
		sh.why, sh.whyAt = c.ix.noFit(j), c.ix.version+1
	}
	return sh.why
}

// Schedule runs one cycle over the snapshot and returns its decisions.
func Schedule(s Snapshot) Result {
	p := s.Policy.WithDefaults()
	c := &cycle{s: &s, p: &p, now: s.Now, ix: newIndex(s.Nodes),
		victim: map[int]bool{}, claimed: map[int]bool{}, plain: map[plainShape]*shapeState{}, shapes: map[shape]*shapeState{}}
	c.out.Pending = make([]Pending, 0, len(s.Queue))
	s.Running = c.wholeOnly(s.Running) // gpushare.go
	c.tally()
	c.countParts()
	c.cpu = newCPUJobs(&s)
	c.bk = newBookings(c.ix, s.Bookings, s.Now)
	if c.bk != nil {
		c.bk.init(c.ix)
	}
	c.bookingStops() // booking.go
	c.mayPreempt = p.Preemption
	c.placedOn = make([]int32, 0, len(s.Running))
	perNode := make([]int, len(s.Nodes))
	if !p.PlainBestFit {
		c.ix.drain = make([]int64, len(s.Nodes))
	}
	for ri := range s.Running {
		r := &s.Running[ri]
		c.mayPreempt = c.mayPreempt || r.Borrowed || r.Preempting || r.Idle && p.PreemptIdle
		end := int64(0)
		if !r.Preempting && c.ix.drain != nil {
			end = max(addRel(int64(r.StartedAt.Sub(c.now)), r.Estimate), 0)
		}
		for _, pl := range r.Placements {
			n, ok := c.ix.byID[pl.NodeID]
			if !ok {
				n = -1
			} else {
				perNode[n]++
				if c.ix.drain != nil {
					c.ix.drain[n] = max(c.ix.drain[n], end)
				}
			}
			c.placedOn = append(c.placedOn, int32(n))
		}
	}
	// Each node's running jobs, in one allocation.
	c.runningOn = make([][]int, len(s.Nodes))
	slab := make([]int, len(c.placedOn))
	for n, k := range perNode {
		c.runningOn[n], slab = slab[:0:k], slab[k:]
	}
	k := 0
	for ri := range s.Running {
		for range s.Running[ri].Placements {
			if n := c.placedOn[k]; n >= 0 {
				c.runningOn[n] = append(c.runningOn[n], ri)
			}
			k++
		}
	}

	// 1. Walk the queue in the policy's order.
	budget := budgetOf(&s, &p)
	c.starveAfter = budget.after
	if budget.light {
		c.lightAfter = budget.lightAfter
	}
	w, sorted := newWalkerSorted(s.Queue, &p, s.Usage, c.shareUser, c.shareProject, s.Now, budget)
	if OldestHead(&p) && c.bk == nil {
		c.reserveOldest(sorted) // starve.go
	}
	var borrowers []*Job
	blocked := false // backfill off and the head waits: nothing passes it
	for j, ok := w.next(); ok; j, ok = w.next() {
		orig := j
		c.prepare(j) // the GPUs bookings keep it off (booking.go)
		if !blocked && !j.NotBefore.After(c.now) {
			j = c.elasticAsk(j, false) // elastic: the count it may start with now
		}
		switch {
		case j.Held != "":
			c.pend(Pending{JobID: j.ID, Reason: j.Held, note: textNote(j.HeldNote)})
		case c.cpuCapped(j): // its user's zero-GPU jobs are at the cap (cpujobs.go)
			c.pendCPU(j)
		case blocked:
			c.pend(Pending{JobID: j.ID, Reason: ReasonBehindHead, note: note{src: c.behind}})
		case j.NotBefore.After(c.now) && j.Begin:
			c.pend(Pending{JobID: j.ID, Reason: ReasonBeginTime, EstimatedStart: j.NotBefore,
				note: note{kind: noteBegin, src: &noteSrc{now: c.now, at: j.NotBefore}}})
		case j.NotBefore.After(c.now):
			c.pend(Pending{JobID: j.ID, Reason: ReasonBackoff, EstimatedStart: j.NotBefore,
				note: note{kind: noteBackoff, src: &noteSrc{now: c.now, at: j.NotBefore}}})
		case j.Fractional(): // a MIG slice or an MPS share (gpushare.go)
			if c.startPart(j) {
				w.placed(j, Equivalents(c.out.Starts[len(c.out.Starts)-1].Placements)) // its fraction
				c.again(w, j)
			}
		case j.Booking != "":
			if c.startBooked(j) { // booking.go: its GPUs, in its window
				w.placed(j, wholeOf(j))
				c.again(w, j)
			}
		case c.overQuota(j) != "" && !mayBorrow(j.Class):
			// Interactive work waits within its quotas (class.go).
			c.pend(Pending{JobID: j.ID, Reason: ReasonQuota, note: textNote(c.overQuota(j) + "; interactive jobs never borrow GPUs beyond a quota")})
		case c.overQuota(j) != "":
			borrowers = append(borrowers, orig) // 2. deferred: it may borrow idle GPUs
		default:
			sh := c.shapeOf(j)
			if c.landMagnetic(j) || c.start(j, sh, false) || c.startInto(j, sh, false) {
				w.placed(j, wholeOf(j))
				c.again(w, j) // a group's next job (group.go)
			} else if c.wait(j, sh, false) {
				w.placed(j, wholeOf(j)) // GPUs are being freed for it
				c.again(w, j)
			} else {
				c.explainBooked(j, sh) // booking.go
				if c.res != nil && c.res.jobID == j.ID && !p.Backfill {
					blocked = true
					c.behind = &noteSrc{text: "waiting behind job " + j.ID + ", which is first in line (backfill is off)"}
				}
			}
		}
	}
	// 3. Jobs over quota borrow what is left idle, never delaying the head.
	for _, j := range borrowers {
		if blocked {
			c.pend(Pending{JobID: j.ID, Reason: ReasonBehindHead, note: note{src: c.behind}})
			continue
		}
		if c.cpuCapped(j) { // zero-GPU jobs of its user started since it was deferred
			c.pendCPU(j)
			continue
		}
		c.prepare(j)
		j = c.elasticAsk(j, true)
		sh := c.shapeOf(j)
		started := c.start(j, sh, true) || c.startInto(j, sh, true)
		for started && c.more(j) { // a group's next jobs (group.go)
			if c.cpuCapped(j) {
				c.pendCPU(j)
				break
			}
			started = c.start(j, sh, true) || c.startInto(j, sh, true)
		}
		if !started {
			c.wait(j, sh, true)
			c.explainBooked(j, sh)
			// Say it is over quota rather than short of GPUs.
			if last := &c.out.Pending[len(c.out.Pending)-1]; last.JobID == j.ID && last.Reason == ReasonResources {
				last.Reason, last.note = ReasonQuota, textNote(c.overQuota(j)+"; no idle GPUs to borrow")
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

// fits reports whether the job could ever run on this cluster.
func (c *cycle) fits(j *Job, sh *shapeState) bool {
	if sh.fits == 0 {
		sh.fits = -1
		if c.ix.fitsEmpty(j) {
			sh.fits = 1
		}
	}
	return sh.fits > 0
}

// start places the job now if it can without delaying the head job's
// reservation, and records the start.
func (c *cycle) start(j *Job, sh *shapeState, borrowed bool) bool {
	var ps []Placement
	ok := false
	if sh.noFitAt != c.ix.version+1 {
		if ps, ok = c.ix.find(j, c.p.Spread); !ok {
			sh.noFitAt = c.ix.version + 1 // the same shape will not fit until something changes
		}
	}
	// (The string comparison last: it is the dearest test, made for
	// every job that does not fit.)
	if !ok && c.res != nil && len(c.res.held) > 0 && c.p.Backfill && j.EstimateGiven &&
		(sh.resAt != c.ix.version+1 || sh.resOK) && // its shape did not fit them either, at this version
		!c.now.Add(j.Estimate).After(c.res.at) && c.res.jobID != j.ID {
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
		sh.resAt, sh.resOK = v0+1, false // as couldUseReserved keeps it
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
	c.cpuStarted(j)
	n := j.GPUs * nodesWanted(j)
	c.holdQuota(j, ps, n)
	e := float64(n)
	if j.Fractional() {
		e = Equivalents(ps)
	}
	c.shareUser[j.User] += e
	c.shareProject[j.Project] += e
	if c.ix.drain != nil {
		for _, p := range ps {
			if k, ok := c.ix.byID[p.NodeID]; ok {
				c.ix.drain[k] = max(c.ix.drain[k], int64(j.Estimate))
			}
		}
	}
	if c.tl != nil {
		c.tl.markRel(c.ix, ps, addRel(0, j.Estimate))
	}
}

// wait handles a job that does not fit now: unsatisfiable, preempt for it,
// make it the head with a reservation, or leave it waiting. It returns
// true when GPUs are being freed for the job.
func (c *cycle) wait(j *Job, sh *shapeState, borrowing bool) bool {
	if !c.ix.anySchedulable() {
		if n := c.diskFullNote(); n != nil {
			c.pend(Pending{JobID: j.ID, Reason: ReasonNodeDiskFull, note: *n})
			return false
		}
		c.pend(Pending{JobID: j.ID, Reason: ReasonNoNodes, note: note{kind: noteNoFit, src: c.whyNoFit(j, sh)}})
		return false
	}
	if !c.fits(j, sh) {
		if sh.unsat == nil {
			sh.unsat = &noteSrc{shape: descOf(j)}
		}
		c.pend(Pending{JobID: j.ID, Reason: ReasonUnsatisfiable, note: note{kind: noteUnsat, src: sh.unsat}})
		return false
	}
	why := note{kind: noteNoFit, src: c.whyNoFit(j, sh)}
	// Preempt for it, or take GPUs being freed. (Without preemption, and
	// with no running job borrowed, idle or stopping, planVictims could
	// only find the free GPUs that start did not.)
	if !borrowing && c.mayPreempt && c.preemptTries < maxPreemptTries {
		c.preemptTries++
		if plans, ok := c.planVictims(j, borrowing); ok {
			c.pend(c.preemptFor(j, borrowing, plans))
			return true
		}
	}
	if c.res != nil && c.res.jobID == j.ID && !borrowing { // the oldest job's, made before the walk
		c.pend(Pending{JobID: j.ID, Reason: ReasonResources, note: why, EstimatedStart: c.res.startAt()})
		return false
	}
	if c.res == nil && !borrowing && !c.mayReserve(j) { // young: it waits without one (starve.go)
		c.pend(Pending{JobID: j.ID, Reason: ReasonResources, note: why})
		return false
	}
	if c.res == nil && !borrowing {
		if c.tl == nil {
			c.tl = newTimeline(c.ix, c.s.Running, c.placedOn, c.now)
			c.tl.bk = c.bk
			for i, st := range c.out.Starts {
				c.tl.markRel(c.ix, st.Placements, addRel(0, c.startEst[i]))
			}
		}
		if r, ok := reserve(c.ix, c.tl, j); ok {
			c.res = r
			c.pend(Pending{JobID: j.ID, Reason: ReasonResources, note: why, EstimatedStart: r.at})
			return false
		}
		// No estimate frees enough: the first waiting job still blocks
		// others when backfill is off.
		c.res = &headReservation{jobID: j.ID, at: never}
		c.pend(Pending{JobID: j.ID, Reason: ReasonResources, note: why})
		return false
	}
	if c.res != nil && !borrowing && c.couldUseReserved(j, sh) {
		if c.resNote == nil {
			c.resNote = &noteSrc{now: c.now, head: c.res.jobID, at: c.res.at, backfill: c.p.Backfill}
		}
		c.pend(Pending{JobID: j.ID, Reason: ReasonBackfillReserved,
			note: note{kind: noteReservation, given: j.EstimateGiven, est: j.Estimate, src: c.resNote}})
		return false
	}
	c.pend(Pending{JobID: j.ID, Reason: ReasonResources, note: why})
	return false
}

// couldUseReserved reports whether the job would fit if the GPUs held for
// the head job were free.
func (c *cycle) couldUseReserved(j *Job, sh *shapeState) bool {
	if len(c.res.held) == 0 {
		return false
	}
	v := c.ix.version
	if sh.resAt == v+1 {
		return sh.resOK
	}
	c.ix.give(c.res.held)
	_, ok := c.ix.find(j, c.p.Spread)
	c.ix.take(c.res.held)
	c.ix.version = v // the same GPUs are free as before
	sh.resAt, sh.resOK = v+1, ok
	return ok
}
