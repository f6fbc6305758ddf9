package sched

import (
	"fmt"
	"slices"
	"strings"
)

// maxPreemptTries bounds how many waiting jobs a cycle looks for victims
// for; the rest wait for the next cycle.
const maxPreemptTries = 4

// victimPlan is how one node could be made to fit a job.
type victimPlan struct {
	node    int
	victims []int   // positions in the cycle's running list
	claim   []int   // positions of preempting jobs whose GPUs it waits for
	cost    float64 // GPU-seconds of work lost
	hard    bool    // some victim is not borrowing
}

// eligible says whether running job ri may be preempted for job j, and
// why. planVictims has set up the cycle's victim search (prepVictims) and
// the job at hand (c.jUser, c.fairOK).
func (c *cycle) eligible(ri int, j *Job, jBorrowing bool) (string, bool) {
	v := &c.s.Running[ri]
	if !c.open[ri] {
		return "", false // already going, or protected: it only just started
	}
	reason := ""
	switch {
	case c.runUser[ri] == c.jUser:
		// The job's own user's: it yields only to their higher-priority
		// job in the same project, and only if, requeued, it would queue
		// behind it (within a user and project, fair_share orders by aged
		// priority too; across projects, by the projects' standing).
		// Reclaim, idleness and shares weigh users against each other, not
		// a user's jobs.
		if !c.p.Preemption || v.Priority >= j.Priority || v.Project != j.Project || c.requeuedAhead(v, j, true) {
			return "", false
		}
		reason = ReasonPreempted
	case v.Borrowed && !jBorrowing:
		reason = ReasonReclaim
	case v.Idle && c.p.PreemptIdle:
		reason = ReasonIdle
	case !c.p.Preemption:
		return "", false
	case v.Priority < j.Priority && !c.requeuedAhead(v, j, false):
		reason = ReasonPreempted
	case c.p.Name == PolicyFairShare && v.Priority == j.Priority && c.overShare(ri, j):
		reason = ReasonPreempted
	default:
		return "", false
	}
	if c.res != nil && c.res.jobID != j.ID && c.res.overlaps(v.Placements) {
		return "", false // its GPUs are promised to the head job
	}
	if reason == ReasonPreempted && c.starvesAhead(v, j) {
		return "", false // requeued, it would be served first (starve.go)
	}
	return reason, true
}

// overShare reports whether running job ri's user holds more GPUs than
// j's user would with j, and stands higher: fair share lets j take its
// GPUs at equal priority. Remembered per user while planVictims looks
// for j.
func (c *cycle) overShare(ri int, j *Job) bool {
	k := c.runUser[ri]
	if c.fairOK[k] == 0 {
		v := &c.s.Running[ri]
		c.fairOK[k] = -1
		if c.shareUser[v.User] > c.shareUser[j.User]+wholeOf(j) && c.share(v.User) > c.share(j.User) {
			c.fairOK[k] = 1
		}
	}
	return c.fairOK[k] > 0
}

// staysBehind reports whether, under fair_share, running job v's user
// (same project as j) or project (another) would still not rank ahead of
// j's once the victims are gone and j holds their GPUs: with victims' GPUs
// taken from their users and projects and j's given to its own, v's
// standing is at least j's. Otherwise v, requeued, would be served before
// j when its GPUs come free (the order is by standing, not by priority)
// and take them straight back, and j would preempt it again after
// min_run_time, for ever. Charging j's GPUs leaves j a margin of an hour
// of its GPUs for the usage that grows while the victims stop.
func (c *cycle) staysBehind(v *Running, j *Job, victims ...[]int) bool {
	if v.User == j.User && v.Project == j.Project {
		return true // one user's jobs in one project: eligible has ordered them (requeuedAhead)
	}
	need := wholeOf(j)
	freed := func(same func(r *Running) bool) float64 {
		n := 0.0
		for _, vs := range victims {
			for _, ri := range vs {
				if r := &c.s.Running[ri]; same(r) {
					n += float64(gpuCount(r)) // victims hold whole GPUs
				}
			}
		}
		return n
	}
	if v.Project != j.Project {
		mine := projectStanding(c.p, j.Project, c.s.Usage.Projects[j.Project], c.shareProject[j.Project]+need)
		gone := freed(func(r *Running) bool { return r.Project == v.Project })
		return projectStanding(c.p, v.Project, c.s.Usage.Projects[v.Project], c.shareProject[v.Project]-gone) >= mine
	}
	mine := userStanding(c.p, j.User, c.s.Usage.Users[j.User], c.shareUser[j.User]+need)
	gone := freed(func(r *Running) bool { return r.User == v.User })
	return userStanding(c.p, v.User, c.s.Usage.Users[v.User], c.shareUser[v.User]-gone) >= mine
}

// requeuedAhead reports whether v, once requeued, would come before j in
// the queue order of the static-order policies (fcfs, priority with aging,
// sjf), or, for a job of j's own user (sameUser), in that user's order
// under fair_share: preempting it for j would only hand its GPUs back to
// it at the next cycle, and the two would thrash every MinRunTime. An old
// low-priority job that aging has lifted above j is therefore not j's
// victim, as it is not behind j in the queue. (Between users, fair_share
// orders by standing, which staysBehind weighs.)
func (c *cycle) requeuedAhead(v *Running, j *Job, sameUser bool) bool {
	if v.SubmittedAt.IsZero() || (c.p.Name == PolicyFairShare && !sameUser) {
		return false
	}
	vj := Job{ID: v.ID, SubmittedAt: v.SubmittedAt, Priority: v.Priority, Estimate: v.Estimate}
	return compareKeyed(keyOf(&vj, c.p), keyOf(j, c.p)) < 0
}

// share is a user's fair-share standing: usage plus held GPUs, per weight.
func (c *cycle) share(user string) float64 {
	return userStanding(c.p, user, c.s.Usage.Users[user], c.shareUser[user])
}

// gpusOn counts a running job's GPUs on node n that pass j's filters.
func (c *cycle) gpusOn(r *Running, n int, j *Job) int {
	ns := &c.ix.nodes[n]
	k := 0
	for _, p := range r.Placements {
		if p.NodeID != ns.node.ID {
			continue
		}
		for _, idx := range p.GPUs {
			if g, ok := ns.at(idx); ok && matches(&ns.node.GPUs[g], j) && (ns.blocked == nil || ns.blocked[g] == 0) {
				k++ // a GPU a booking keeps from j is no room for it
			}
		}
	}
	return k
}

// planVictims finds, for a job that does not fit, the cheapest way to make
// it fit: wait for jobs already being preempted, or preempt eligible jobs
// (borrowed ones first, then the most recently started). It returns false
// when even every eligible victim would not make room: then nobody is
// preempted.
func (c *cycle) planVictims(j *Job, jBorrowing bool) (chosen []victimPlan, ok bool) {
	fair := c.p.Name == PolicyFairShare
	if !c.stopping && !c.openSoft && (j.Priority < c.lowOpen || j.Priority == c.lowOpen && !(fair && c.someoneOver(j))) {
		return nil, false // no running job is one to wait for, nor one it could take
	}
	want := nodesWanted(j)
	var plans []victimPlan
	c.prepVictims()
	c.jUser = -1
	if k, ok := c.userSlot[j.User]; ok {
		c.jUser = k
	}
	clear(c.fairOK)
	equalToo := fair && c.someoneOver(j)
	for n := range c.ix.nodes {
		if !c.ix.nodes[n].node.Schedulable || j.GPUs == 0 || !c.ix.labelsOK(n, j) {
			continue
		}
		have := c.ix.freeMatching(n, j)
		if have+c.victimBound(n, j, jBorrowing, equalToo) < j.GPUs {
			continue // even every possible victim here would not make room
		}
		plan := victimPlan{node: n}
		for _, ri := range c.runningOn[n] {
			r := &c.s.Running[ri]
			if r.Preempting && !c.claimed[ri] && have < j.GPUs {
				if k := c.gpusOn(r, n, j); k > 0 {
					have += k
					plan.claim = append(plan.claim, ri)
				}
			}
		}
		if have < j.GPUs {
			// Count what eligible victims could free before ranking them.
			cands := c.cands[:0]
			room := have
			for _, ri := range c.runningOn[n] {
				if c.victim[ri] {
					continue
				}
				r := &c.s.Running[ri]
				if _, ok := c.eligible(ri, j, jBorrowing); ok {
					cands = append(cands, ri)
					room += c.gpusOn(r, n, j)
				}
			}
			c.cands = cands
			if room < j.GPUs {
				continue
			}
			slices.SortFunc(cands, func(a, b int) int {
				ra, rb := &c.s.Running[a], &c.s.Running[b]
				if ra.Borrowed != rb.Borrowed {
					if ra.Borrowed {
						return -1
					}
					return 1
				}
				if cmp := rb.StartedAt.Compare(ra.StartedAt); cmp != 0 {
					return cmp // most recently started first: the least work lost
				}
				if ra.Priority != rb.Priority {
					return ra.Priority - rb.Priority
				}
				return strings.Compare(ra.ID, rb.ID)
			})
			for _, ri := range cands {
				if have >= j.GPUs {
					break
				}
				r := &c.s.Running[ri]
				k := c.gpusOn(r, n, j)
				if k == 0 {
					continue
				}
				if reason, _ := c.eligible(ri, j, jBorrowing); fair && reason == ReasonPreempted &&
					!c.staysBehind(r, j, plan.victims, []int{ri}) {
					continue
				}
				have += k
				plan.victims = append(plan.victims, ri)
				plan.cost += float64(gpuCount(r)) * c.now.Sub(r.StartedAt).Seconds()
				plan.hard = plan.hard || !r.Borrowed
			}
		}
		if have >= j.GPUs {
			plans = append(plans, plan)
		}
	}
	if len(plans) < want {
		return nil, false
	}
	defer func() {
		// A gang's victims on every node together must stay behind it too.
		if ok && want > 1 && fair {
			var all [][]int
			for _, pl := range chosen {
				all = append(all, pl.victims)
			}
			for _, pl := range chosen {
				for _, ri := range pl.victims {
					if reason, _ := c.eligible(ri, j, jBorrowing); reason == ReasonPreempted && !c.staysBehind(&c.s.Running[ri], j, all...) {
						chosen, ok = nil, false
						return
					}
				}
			}
		}
	}()
	if want == 1 {
		// The first of the cheapest: what a stable sort puts first.
		best := 0
		for i := 1; i < len(plans); i++ {
			if comparePlans(&plans[i], &plans[best]) < 0 {
				best = i
			}
		}
		return plans[best : best+1], true
	}
	slices.SortStableFunc(plans, func(a, b victimPlan) int { return comparePlans(&a, &b) })
	return plans[:want], true
}

// comparePlans orders victim plans: borrowed victims only first, then the
// least work lost, then the fewest victims.
func comparePlans(a, b *victimPlan) int {
	if a.hard != b.hard {
		if !a.hard {
			return -1
		}
		return 1
	}
	switch {
	case a.cost < b.cost:
		return -1
	case a.cost > b.cost:
		return 1
	}
	return len(a.victims) - len(b.victims)
}

// prepVictims sets up, at a cycle's first victim search, what every
// search reads besides what tally noted (each running job's user slot,
// and whether it may be preempted at all: not stopping, not protected):
// per node the GPUs of such jobs by priority, and those borrowed, an upper
// bound that lets planVictims skip nodes.
func (c *cycle) prepVictims() {
	if c.byPrio != nil {
		return
	}
	rs := c.s.Running
	c.fairOK = make([]int8, len(c.userSlot))
	c.byPrio = make([][5]int, len(c.ix.nodes))
	c.borrowedOn = make([]int, len(c.ix.nodes))
	for n, ris := range c.runningOn {
		for _, ri := range ris {
			if !c.open[ri] {
				continue
			}
			r := &rs[ri]
			k := 0
			for _, p := range r.Placements {
				if p.NodeID == c.ix.nodes[n].node.ID {
					k += len(p.GPUs)
				}
			}
			c.byPrio[n][min(max(r.Priority, 0), 4)] += k
			if r.Borrowed || (r.Idle && c.p.PreemptIdle) {
				c.borrowedOn[n] += k
			}
		}
	}
}

// victimBound is at most how many GPUs preemption could free on node n for
// job j, plus those of jobs already being preempted. equalToo: jobs of
// j's priority count too (fair share, when some user is over).
func (c *cycle) victimBound(n int, j *Job, jBorrowing, equalToo bool) int {
	b := 0
	for _, ri := range c.runningOn[n] {
		if c.s.Running[ri].Preempting {
			b += gpuCount(&c.s.Running[ri])
		}
	}
	if !jBorrowing {
		b += c.borrowedOn[n]
	}
	if !c.p.Preemption {
		return b
	}
	top := min(max(j.Priority-1, 0), 4)
	if equalToo {
		top = min(max(j.Priority, 0), 4) // equal priority, over share
	}
	for p := 0; p <= top; p++ {
		b += c.byPrio[n][p]
	}
	return b
}

// someoneOver reports whether any user holds enough more than j's user
// that fair share would let j preempt their equal-priority jobs.
func (c *cycle) someoneOver(j *Job) bool {
	need := c.shareUser[j.User] + wholeOf(j)
	mine := c.share(j.User)
	for u, n := range c.shareUser {
		if u != j.User && n > need && c.share(u) > mine {
			return true
		}
	}
	return false
}

// holdFree takes the node's free GPUs that fit the job out of the index
// (up to what it needs), so that later jobs in the cycle cannot take the
// room that preemption is making for it.
func (c *cycle) holdFree(n int, j *Job) {
	ns := &c.ix.nodes[n]
	p := Placement{NodeID: ns.node.ID}
	for g := range ns.node.GPUs {
		if len(p.GPUs) < j.GPUs && ns.avail(g) && matches(&ns.node.GPUs[g], j) {
			p.GPUs = append(p.GPUs, ns.node.GPUs[g].Index)
		}
	}
	c.ix.take([]Placement{p})
}

func gpuCount(r *Running) int {
	n := 0
	for _, p := range r.Placements {
		n += len(p.GPUs)
	}
	return n
}

// preemptFor carries out a victim plan: the victims are told to stop, the
// GPUs of jobs already stopping are claimed, and the job waits for them.
func (c *cycle) preemptFor(j *Job, jBorrowing bool, plans []victimPlan) Pending {
	var names []string
	for _, pl := range plans {
		c.holdFree(pl.node, j)
		for _, ri := range pl.claim {
			c.claimed[ri] = true
		}
		for _, ri := range pl.victims {
			r := &c.s.Running[ri]
			reason, _ := c.eligible(ri, j, jBorrowing)
			msg := fmt.Sprintf("preempted for job %s (%s)", j.ID, preemptWhy(reason, r, j))
			c.out.Preemptions = append(c.out.Preemptions, Preemption{JobID: r.ID, ForJob: j.ID, Reason: reason, Message: msg})
			c.victim[ri] = true
			// The victim's GPUs now count for the job that takes them.
			n := float64(gpuCount(r)) // victims hold whole GPUs
			c.shareUser[r.User] -= n
			c.shareProject[r.Project] -= n
			c.claimed[ri] = true
			names = append(names, r.ID)
		}
	}
	c.shareUser[j.User] += wholeOf(j)
	c.shareProject[j.Project] += wholeOf(j)
	msg := "waiting for GPUs being freed by preempted jobs"
	if len(names) > 0 {
		msg = fmt.Sprintf("preempting %s to make room", strings.Join(names, ", "))
	}
	return Pending{JobID: j.ID, Reason: ReasonPreempting, note: textNote(msg)}
}

func preemptWhy(reason string, v *Running, j *Job) string {
	switch {
	case reason == ReasonReclaim:
		return "its GPUs were borrowed beyond its quota and are needed within quota"
	case reason == ReasonIdle:
		return "its GPUs sat idle"
	case v.Priority < j.Priority:
		return fmt.Sprintf("priority %s over %s", priorityName(j.Priority), priorityName(v.Priority))
	}
	return fmt.Sprintf("user %s is under their fair share and %s is over", j.User, v.User)
}

func priorityName(p int) string {
	names := []string{"", "low", "normal", "high", "critical"}
	if p >= 1 && p <= 4 {
		return names[p]
	}
	return fmt.Sprint(p)
}
