package sched

import (
	"time"
)

// partPlan lays out the waiting jobs that ask for a part of a GPU (a MIG
// slice or an MPS share, gpushare.go) as the timeline does whole GPUs:
// a part held by a running job is free when that job ends at its
// estimate (outlived, as in EstimateStarts; at once for one being
// preempted), a part this cycle starts on when that start's estimate runs
// out, and each waiting job takes, in queue order, the fitting part that
// is free first, from then for its own estimate. A slice held by
// something that has no end (a hold) is never free in the plan.
type partPlan struct {
	now     time.Time
	ix      *index
	slices  []slicePlan // every MIG GPU's slices, in node order
	sliceIx map[sliceAt]int
	shares  []*sharePlan // every shared GPU, in node order
	shareIx map[gpuAt]int
}

// slicePlan is when a slice is free; never: not in the plan (a hold has
// it).
type slicePlan struct {
	at    sliceAt
	free  time.Time
	never bool
}

type gpuAt struct{ node, gpu int }

type sliceAt struct {
	gpuAt
	slice int
}

// sharePlan is a shared GPU's shares over time: those running, starting
// this cycle and planned.
type sharePlan struct {
	at     gpuAt
	memMiB int64
	uses   []shareUse
}

// shareUse is a share of a GPU from one time to another; whole marks a
// whole-GPU job on the shared GPU, which leaves no room for any share.
type shareUse struct {
	from, to time.Time
	mib      int64
	compute  int
	user     string
	whole    bool
}

// newPartPlan is the parts' plan at s.Now: running is s.Running with the
// plan's estimates (outlived, preempting), starts the cycle's starts
// with their estimates.
func newPartPlan(ix *index, s *Snapshot, running []Running, starts []Start, jobs map[string]*Job, defEst time.Duration) *partPlan {
	pp := &partPlan{now: s.Now, ix: ix, sliceIx: map[sliceAt]int{}, shareIx: map[gpuAt]int{}}
	for n := range ix.nodes {
		for g, gpu := range ix.nodes[n].node.GPUs {
			switch {
			case gpu.MIG != nil:
				for si, sl := range gpu.MIG {
					k := sliceAt{gpuAt{n, g}, si}
					pp.sliceIx[k] = len(pp.slices)
					pp.slices = append(pp.slices, slicePlan{at: k, free: s.Now, never: !sl.Free})
				}
			case gpu.Share != nil:
				pp.shareIx[gpuAt{n, g}] = len(pp.shares)
				pp.shares = append(pp.shares, &sharePlan{at: gpuAt{n, g}, memMiB: gpu.MemoryMiB})
			}
		}
	}
	for i := range running {
		r := &running[i]
		end := s.Now
		if t := r.StartedAt.Add(r.Estimate); !r.Preempting && t.After(end) {
			end = t
		}
		pp.hold(r.Placements, r.User, end)
	}
	for _, st := range starts {
		est, user := defEst, ""
		if j := jobs[st.JobID]; j != nil {
			est, user = j.Estimate, j.User
		}
		pp.hold(st.Placements, user, s.Now.Add(est))
	}
	return pp
}

// hold marks the parts of placements held until end (and a whole GPU on
// a shared one: no share fits beside it).
func (pp *partPlan) hold(ps []Placement, user string, end time.Time) {
	for _, p := range ps {
		n, ok := pp.ix.byID[p.NodeID]
		if !ok {
			continue
		}
		for _, gi := range p.GPUs {
			g, ok := pp.ix.nodes[n].at(gi)
			if !ok {
				continue
			}
			at := gpuAt{n, g}
			if p.Part != nil && p.Part.MIG >= 0 {
				if i, ok := pp.sliceIx[sliceAt{at, p.Part.MIG}]; ok {
					pp.slices[i].free, pp.slices[i].never = end, false
				}
				continue
			}
			if i, ok := pp.shareIx[at]; ok {
				u := shareUse{from: pp.now, to: end, user: user, whole: p.Part == nil}
				if p.Part != nil {
					u.mib, u.compute = p.Part.ShareMiB, p.Part.ShareCompute
				}
				pp.shares[i].uses = append(pp.shares[i].uses, u)
			}
		}
	}
}

// earliest is when the waiting job j could start on a part, and takes
// that part for j.Estimate from then; ok false where no part could ever
// hold it. A time not after now is returned as such (the caller gives it
// no estimate: something the plan does not see keeps the job waiting).
func (pp *partPlan) earliest(j *Job) (time.Time, bool) {
	if j.MIGProfile != "" {
		return pp.earliestSlice(j)
	}
	return pp.earliestShare(j)
}

func (pp *partPlan) earliestSlice(j *Job) (time.Time, bool) {
	best := -1
	for i := range pp.slices {
		sp := &pp.slices[i]
		if sp.never || best >= 0 && !sp.free.Before(pp.slices[best].free) {
			continue // the first free soonest, in node order, wins
		}
		k := sp.at
		if sliceFits(&pp.ix.nodes[k.node].node.GPUs[k.gpu].MIG[k.slice], j) && pp.ix.partOK(k.node, k.gpu, j) {
			best = i
		}
	}
	if best < 0 {
		return time.Time{}, false
	}
	at := pp.slices[best].free
	pp.slices[best].free = at.Add(j.Estimate)
	return at, true
}

func (pp *partPlan) earliestShare(j *Job) (time.Time, bool) {
	var best *sharePlan
	var at time.Time
	for _, sp := range pp.shares {
		k := sp.at
		if j.ShareMiB > sp.memMiB || j.ShareCompute > 100 || !pp.ix.partOK(k.node, k.gpu, j) {
			continue
		}
		// Only a start before the best so far is looked for: the first
		// GPU in node order wins a tie.
		if t, ok := sp.earliest(pp.now, j, at, best != nil); ok {
			best, at = sp, t
		}
	}
	if best == nil {
		return time.Time{}, false
	}
	best.uses = append(best.uses, shareUse{from: at, to: at.Add(j.Estimate), mib: j.ShareMiB, compute: j.ShareCompute, user: j.User})
	return at, true
}

// earliest is the first time from now, now or when a use ends, at which
// j's share fits beside every use overlapping its run (fitsAt); with
// bounded, only a time before bound is looked for.
func (sp *sharePlan) earliest(now time.Time, j *Job, bound time.Time, bounded bool) (time.Time, bool) {
	best, found := bound, false
	try := func(t time.Time) {
		if (found || bounded) && !t.Before(best) {
			return
		}
		if sp.fitsAt(t, j) {
			best, found = t, true
		}
	}
	try(now)
	for _, u := range sp.uses {
		if u.to.After(now) {
			try(u.to)
		}
	}
	return best, found
}

// fitsAt reports whether j's share, run from t for its estimate, has the
// memory and compute to spare beside every use it overlaps, all of them
// its user's shares (one MPS server serves one user).
func (sp *sharePlan) fitsAt(t time.Time, j *Job) bool {
	end := t.Add(j.Estimate)
	mib, compute := j.ShareMiB, j.ShareCompute
	for _, u := range sp.uses {
		if !u.from.Before(end) || !u.to.After(t) { // no overlap with [t, end)
			continue
		}
		if u.whole || u.user != j.User {
			return false
		}
		if mib, compute = mib+u.mib, compute+u.compute; mib > sp.memMiB || compute > 100 {
			return false
		}
	}
	return true
}
