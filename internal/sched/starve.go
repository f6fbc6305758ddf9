package sched

import (
	"math"
	"time"
)

// Starvation.
//
// Under fair_share a user who has used much waits behind everyone who has
// used less, for as long as they keep submitting: a big or long job of a
// heavy user can wait for weeks, and a long job started late stretches
// the makespan. So a job that has waited StarveAfter since it was
// submitted, and StarveBacklog times the backlog (the time the cluster
// needs to drain its queued and running work: at a load it does not keep
// up with, the backlog grows and so does the threshold, and the queue
// does not age into starving as a whole, which would serve it
// first-come first-served), is starving, and a cycle serves the starving jobs before
// every other, oldest first (by aged priority, the order of one user's
// jobs), as long as the jobs that went first hold less than StarveShare
// of the GPUs (past it, a starving job waits its fair-share turn: were
// every old job served first, at high load the queue would age until it
// was served first-come first-served): the first starving job that does
// not fit becomes the head and
// holds the reservation, and since the oldest stays the oldest until it
// starts, that reservation stays where it is from cycle to cycle
// instead of moving whenever the users' shares do (GPUs drained for a
// head that the next cycle abandons sit idle). The jobs that have not
// waited that long keep the fair-share order among themselves.

// At light load the backlog is mostly the time left of long running jobs,
// not a queue: one backlog is days, and a gang that fair share passes over
// waits it out where StarveAfter alone would have served it. So while the
// queued work would drain within StarveLightDrain (DrainTime: the queue is
// short, whatever the running jobs have left), a job that has waited
// StarveAfter starves too (light starving), after the jobs that have also
// waited the backlog, and only while the jobs that went first for starving
// hold less than StarveLightShare of the GPUs. At high load the queue
// drains in weeks and the rule is off, so it does not turn the queue
// first-come first-served there.

// A job that waited StarveAfter is not passed over everywhere alike: at
// the lightest loads the queue drains in hours, and fair share can pass
// over a heavy team's gang for a day or more, where first-come
// first-served would have started it within hours. So the light
// threshold shrinks with the queue: StarveAfter for every StarveLightScale
// (a week) the queue takes to drain, never under StarveLightFloor nor
// over StarveAfter. The jobs that go first for it are still bounded by
// StarveLightShare, and only those that waited StarveAfter count against
// it: counting the sooner ones too would fill the share with them and
// keep the jobs that waited two days out.

// StarveLightScale is the drain time at which the light threshold
// reaches StarveAfter: below it the threshold shrinks in proportion.
const StarveLightScale = 168 * time.Hour

// DefaultStarveLightFloor is the least a job waits to starve light, when
// the policy does not say.
const DefaultStarveLightFloor = 12 * time.Hour

// DefaultStarveLightShare is the share of the GPUs below which light
// starving jobs go first, when the policy does not say.
const DefaultStarveLightShare = 0.3

// DefaultStarveLightDrain is the longest drain time of the queued work at
// which jobs starve light, when the policy does not say.
const DefaultStarveLightDrain = 168 * time.Hour

// DefaultStarveAfter is how long a job waits before it is starving, when
// the policy does not say.
const DefaultStarveAfter = 48 * time.Hour

// Starving reports whether job j, queued at now, has waited StarveAfter
// under policy p (as given or with its defaults). A cycle also asks the
// starving to have waited StarveBacklog times the backlog (starvingOf);
// at light load a job may starve light sooner (StarveFloor, which a caller
// that hands the core part of its queue goes by).
func Starving(j *Job, now time.Time, p *Policy) bool {
	after := StarveAfterOf(p)
	return p.Name == PolicyFairShare && after > 0 && !now.IsZero() && !j.SubmittedAt.After(now.Add(-after))
}

// starveWalker yields the starving jobs first, in aged-priority order,
// while the budget lasts, then the rest (and the starving jobs it did not
// reach) in the order of the fair-share walker; every placement is
// charged to that walker, so fair share's turns count the starving jobs'
// GPUs too.
type starveWalker struct {
	tail   sliceWalker // the jobs on the tail (tail.go), before all, outside the budget
	first  sliceWalker
	rest   *fairWalker
	inRest bool // the last job came from rest
	inTail bool // the last job came from tail
	replay bool // again: yield last once more
	last   *Job // the last job from tail or first
	budget starveBudget
}

func (w *starveWalker) next() (*Job, bool) {
	if w.replay {
		w.replay = false
		if w.inTail || w.budget.used < w.budget.capAt(w.first.i-1) {
			return w.last, true
		}
		// The budget ran out within a group: its other jobs wait their
		// fair-share turn, as separate starving jobs past the budget do.
		delete(w.rest.done, w.last)
	}
	for {
		j, ok := w.tail.next()
		if !ok {
			break
		}
		if !w.rest.done[j] {
			w.inRest, w.inTail, w.last = false, true, j
			w.rest.done[j] = true
			return j, true
		}
	}
	w.inTail = false
	for w.first.i < len(w.first.jobs) && (w.budget.used < w.budget.capAt(w.first.i) || w.first.i == 0 && w.budget.oldest) {
		j, ok := w.first.next()
		if !ok {
			break
		}
		if w.rest.done[j] {
			continue // went first on the tail
		}
		w.inRest, w.last = false, j
		w.rest.done[j] = true
		return j, true
	}
	w.inRest = true
	return w.rest.next()
}

func (w *starveWalker) placed(j *Job, e float64) {
	w.rest.placed(j, e)
	if !w.inRest && !w.inTail {
		w.budget.used += j.GPUs * nodesWanted(j)
	}
}

func (w *starveWalker) again() {
	if w.inRest {
		w.rest.again()
		return
	}
	w.replay = true
}

// starvingOf returns the starving jobs of jobs, in order: those Starving
// that have also waited the budget's after (StarveBacklog).
func starvingOf(jobs []*Job, p *Policy, now time.Time, after time.Duration) []*Job {
	var starving []*Job
	for _, j := range jobs {
		if Starving(j, now, p) && !j.SubmittedAt.After(now.Add(-after)) {
			starving = append(starving, j)
		}
	}
	return starving
}

// lightStarvingOf returns the jobs of jobs, in order, that have waited
// lightAfter, under a policy that starves jobs, but not after as well as
// StarveAfter (those starvingOf leaves out).
func lightStarvingOf(jobs []*Job, p *Policy, now time.Time, after, lightAfter time.Duration) []*Job {
	var light []*Job
	for _, j := range jobs {
		full := Starving(j, now, p) && !j.SubmittedAt.After(now.Add(-after))
		if !full && p.Name == PolicyFairShare && StarveAfterOf(p) > 0 && !now.IsZero() && !j.SubmittedAt.After(now.Add(-lightAfter)) {
			light = append(light, j)
		}
	}
	return light
}

// StarveAfterOf is p's StarveAfter with its default (negative: never).
func StarveAfterOf(p *Policy) time.Duration {
	if p.StarveAfter == 0 {
		return DefaultStarveAfter
	}
	return p.StarveAfter
}

// StarveFloor is the least a job queued in s must have waited to be
// starving, fully or light: StarveAfter, or less while light starving
// applies (StarveLightFloor); false when no job can starve. A caller that
// hands the core part of its queue hands it every job that has waited
// this long.
func StarveFloor(s *Snapshot) (time.Duration, bool) {
	p := s.Policy.WithDefaults()
	after := StarveAfterOf(&p)
	if p.Name != PolicyFairShare || after < 0 || s.Now.IsZero() {
		return 0, false
	}
	gpus, _ := queuedWork(s)
	if light, _, lightAfter := lightOf(s, &p, int(gpus)); light {
		return min(after, lightAfter), true
	}
	return after, true
}

// DefaultStarveShare is the share of the cluster's GPUs that starving
// jobs may hold by going first, when the policy does not say.
const DefaultStarveShare = 1.0

// DefaultStarveBacklog is how many backlogs a job waits, besides
// StarveAfter, before it is starving, when the policy does not say.
const DefaultStarveBacklog = 1.0

// starveBacklog is p's StarveBacklog with its default; 0: none.
func starveBacklog(p *Policy) float64 {
	switch {
	case p.StarveBacklog < 0:
		return 0
	case p.StarveBacklog == 0:
		return DefaultStarveBacklog
	}
	return p.StarveBacklog
}

// starveBudget is how many GPUs starving jobs hold by going first (used),
// and the most they may (cap); and the shortest estimate on the tail
// (tail.go), when onTail.
type starveBudget struct {
	used, cap int
	tail      time.Duration
	onTail    bool
	oldest    bool // the oldest starving job goes first past the cap
	// oldestWait: under oldest, the oldest starving job goes first past
	// the cap only once it has waited this long (OldestBacklog times the
	// backlog), and oldestStretch times its estimate.
	oldestWait    time.Duration
	oldestStretch float64
	// after: a job starves only once it has waited this long too
	// (StarveBacklog times the backlog; StarveAfter stays the floor).
	after time.Duration
	// light: light starving is on (StarveLightShare); the starving jobs
	// past the first nFull starve light, and go first only while used is
	// under lightCap.
	light    bool
	lightCap int
	nFull    int
	// lightAfter: under light, how long a job waits to starve light
	// (StarveAfter, or less: StarveLightFloor).
	lightAfter time.Duration
}

// capAt is the cap for the i-th starving job of the walk.
func (b *starveBudget) capAt(i int) int {
	if b.light && i >= b.nFull {
		return min(b.cap, b.lightCap)
	}
	return b.cap
}

// oldestGoes reports whether j, the oldest starving job, goes first past
// the cap at now: OldestFirst is on, and j has waited long against the
// backlog and against its own estimate (OldestBacklog, OldestStretch).
func (b *starveBudget) oldestGoes(j *Job, now time.Time) bool {
	if !b.oldest {
		return false
	}
	waited := now.Sub(j.SubmittedAt)
	return waited >= b.oldestWait && float64(waited) >= b.oldestStretch*float64(j.Estimate)
}

// budgetOf is the snapshot's starve budget: the cap is StarveShare of
// every GPU; used counts the GPUs of running jobs that waited StarveAfter
// before they started (those that went first).
func budgetOf(s *Snapshot, p *Policy) starveBudget {
	share, after := p.StarveShare, p.StarveAfter
	if share <= 0 {
		share = DefaultStarveShare
	}
	if after == 0 {
		after = DefaultStarveAfter
	}
	if p.Name != PolicyFairShare {
		return starveBudget{}
	}
	cut, onTail := TailCut(s)
	if after < 0 {
		return starveBudget{tail: cut, onTail: onTail}
	}
	gpus := 0
	for i := range s.Nodes {
		gpus += len(s.Nodes[i].GPUs)
	}
	b := starveBudget{cap: int(math.Floor(min(share, 1) * float64(gpus))), tail: cut, onTail: onTail, oldest: p.OldestFirst,
		oldestStretch: max(p.OldestStretch, 0)}
	if b.oldest && p.OldestBacklog > 0 || starveBacklog(p) > 0 {
		if backlog, ok := Backlog(s); ok {
			if b.oldest {
				b.oldestWait = time.Duration(max(p.OldestBacklog, 0) * float64(backlog))
			}
			b.after = time.Duration(starveBacklog(p) * float64(backlog))
		}
	}
	b.light, b.lightCap, b.lightAfter = lightOf(s, p, gpus)
	for i := range s.Running {
		r := &s.Running[i]
		if !r.Preempting && !r.SubmittedAt.IsZero() && r.StartedAt.Sub(r.SubmittedAt) >= after {
			b.used += gpuCount(r)
		}
	}
	return b
}

// lightOf reports whether light starving is on in s under p, the most
// GPUs the jobs that went first for starving may hold for a light
// starving job to go first, and how long a job waits to starve light:
// StarveAfter for every StarveLightScale of drain time, within
// StarveLightFloor and StarveAfter.
func lightOf(s *Snapshot, p *Policy, gpus int) (bool, int, time.Duration) {
	share, drain := p.StarveLightShare, p.StarveLightDrain
	if share == 0 {
		share = DefaultStarveLightShare
	}
	if drain == 0 {
		drain = DefaultStarveLightDrain
	}
	if share < 0 || drain < 0 || starveBacklog(p) == 0 {
		return false, 0, 0
	}
	d, ok := DrainTime(s)
	if !ok || d > drain {
		return false, 0, 0
	}
	after, floor := StarveAfterOf(p), p.StarveLightFloor
	if floor == 0 {
		floor = DefaultStarveLightFloor
	}
	lightAfter := after
	if floor > 0 {
		scale := float64(after) / float64(StarveLightScale)
		lightAfter = max(floor, min(after, time.Duration(scale*float64(d))))
	}
	return true, int(math.Floor(min(share, 1) * float64(gpus))), lightAfter
}

// starvesAhead reports whether running job v, once requeued, would be
// starving, or light starving, and served before j: it is starving and j
// is not, light starving and j neither starving nor light starving, or
// both are alike and v comes first in aged-priority order (light starving
// is counted whatever its budget holds: at worst a job is not preempted
// that could have been). Preempting it for j would hand
// its GPUs straight back to it.
func (c *cycle) starvesAhead(v *Running, j *Job) bool {
	if v.SubmittedAt.IsZero() {
		return false
	}
	vj := Job{ID: v.ID, SubmittedAt: v.SubmittedAt, Priority: v.Priority, Estimate: v.Estimate}
	// rank: 0 starving, 1 light starving (see lightStarvingOf), 2 neither;
	// the starving come first in the walk, then the light starving.
	rank := func(j *Job) int {
		switch {
		case Starving(j, c.now, c.p) && !j.SubmittedAt.After(c.now.Add(-c.starveAfter)):
			return 0
		case c.lightAfter > 0 && StarveAfterOf(c.p) > 0 && !j.SubmittedAt.After(c.now.Add(-c.lightAfter)):
			return 1
		}
		return 2
	}
	rv, rj := rank(&vj), rank(j)
	switch {
	case rv == 2 || rv > rj:
		return false
	case rv < rj:
		return true
	}
	return compareKeyed(keyOf(&vj, c.p), keyOf(j, c.p)) < 0
}

// The oldest job holds the reservation.
//
// Under EASY backfill the head is the first job of the walk that does not
// fit. Under fair_share the walk's order moves with the users' shares, so
// the head moves too: GPUs drained for one cycle's head sit idle until the
// next cycle makes another job the head and starts small jobs on them.
// So under fair_share (with backfill, and no bookings) the head is the
// oldest job, in aged-priority order, that cannot start now; it keeps its
// reservation, cycle after cycle, until it starts. Jobs still start in the
// fair-share order wherever they cannot delay it.

// OldestHead reports whether a cycle under policy p makes the oldest job
// that cannot start now the head, before it walks the queue.
func OldestHead(p *Policy) bool {
	return p.Name == PolicyFairShare && p.Backfill && p.OldestHead
}

// HeadCandidate reports whether queued job j could be made the head by
// OldestHead's rule at now (if it could not start then): it asks for
// GPUs, is not held, backing off, waiting for its begin time, in a
// booking, elastic or over a quota.
func (c *cycle) headCandidate(j *Job) bool {
	return j.GPUs > 0 && j.Held == "" && !j.NotBefore.After(c.now) && j.Booking == "" && j.GPUsMin == 0 &&
		c.overQuota(j) == "" && c.mayReserve(j)
}

// reserveOldest makes the first job of sorted (the queue in aged-priority
// order) that is a head candidate, could ever run and cannot start now,
// the head, with its reservation.
func (c *cycle) reserveOldest(sorted []*Job) {
	fitsNow := map[*shapeState]bool{}
	for _, j := range sorted {
		if !c.headCandidate(j) {
			continue
		}
		sh := c.shapeOf(j)
		if !c.fits(j, sh) {
			continue
		}
		fit, known := fitsNow[sh]
		if !known {
			_, fit = c.ix.find(j, c.p.Spread)
			fitsNow[sh] = fit
		}
		if fit {
			continue
		}
		if c.tl == nil {
			c.tl = newTimeline(c.ix, c.s.Running, c.placedOn, c.now)
		}
		if r, ok := reserve(c.ix, c.tl, j); ok {
			c.res = r
		} else {
			c.res = &headReservation{jobID: j.ID, at: never}
		}
		return
	}
}

// startAt is the reservation's time, zero when no estimate frees enough.
func (r *headReservation) startAt() time.Time {
	if r.at.Equal(never) {
		return time.Time{}
	}
	return r.at
}

// Reservations for jobs that have waited.
//
// A head's reservation holds GPUs idle while the nodes it needs drain
// (only jobs sure to end before it may use them). Under fair_share the
// queue is short and its waiting jobs are often gangs alone, so those
// idle GPUs are most of what is lost while jobs wait. So a job holds a
// reservation only once it has waited ReserveAfter: until then it takes
// whole nodes as they come free, and nothing is held for it; after, it
// is the head as before (and once starving, the first of the walk).

// DefaultReserveAfter is how long a job waits before it may hold a
// reservation, when the policy does not say.
const DefaultReserveAfter = 2 * time.Hour

// MayReserve reports whether job j, queued at now, may be the head under
// policy p: always but under fair_share with backfill, where it must have
// waited ReserveAfter.
func MayReserve(j *Job, now time.Time, p *Policy) bool {
	after := p.ReserveAfter
	if after == 0 {
		after = DefaultReserveAfter
	}
	return p.Name != PolicyFairShare || !p.Backfill || after < 0 || !j.SubmittedAt.After(now.Add(-after))
}

func (c *cycle) mayReserve(j *Job) bool { return MayReserve(j, c.now, c.p) }
