package sched

import (
	"fmt"
	"strings"
)

// GPU sharing: a job may ask for a part of one GPU instead of whole GPUs,
// either a MIG slice (Job.MIGProfile) or an MPS share (Job.ShareMiB). Such
// a job is placed here, apart from the whole-GPU index: a GPU in MIG mode
// is never Free, so no whole-GPU job, reservation or booking takes it; a
// shared GPU is Free only while no share runs on it, and a share that
// lands on a free one takes it out of the index for the rest of the cycle.
// Running jobs with parts are never a whole-GPU job's preemption victims
// (only a slice job's, slicepreempt.go) and never free whole GPUs in a
// reservation's timeline.

// MIGAny asks for the smallest free slice whose memory fits the job's
// MinMemoryMiB (ties: the fewest compute slices).
const MIGAny = "any"

// Slice is one MIG device of a GPU in MIG mode.
type Slice struct {
	Index         int    // within its GPU
	Profile       string // "1g.10gb", "3g.40gb", ...
	MemoryMiB     int64
	ComputeSlices int
	Free          bool
	Holder        string // who holds it (a job's id or number), told in why a job waits; "" when free
}

// Share is a shareable GPU's MPS state: what the shares running on it
// hold. Its capacity is the GPU's MemoryMiB and 100% of its compute.
type Share struct {
	UsedMiB     int64
	UsedCompute int    // percent
	User        string // the Unix user whose shares run on it: only that user's may join; "" when none run
	Holders     []string
}

// Part is the part of its one GPU a placement holds.
type Part struct {
	// MIG is the slice's index within its GPU, Profile its profile; -1
	// for a share.
	MIG     int
	Profile string
	// ShareMiB and ShareCompute are a share's memory and compute percent.
	ShareMiB     int64
	ShareCompute int
	// Fraction is the part in GPU-equivalents (SliceFraction,
	// ShareFraction): what accounting charges for it.
	Fraction float64
}

// Fractional reports whether the job asks for a part of a GPU.
func (j *Job) Fractional() bool { return j.MIGProfile != "" || j.ShareMiB > 0 }

// SliceFraction is a slice's part of its GPU: its compute slices over the
// GPU's (1g.10gb of an H100: 1/7). An unknown total counts as 7; an
// unknown slice as 1.
func SliceFraction(slices, total int) float64 {
	if total <= 0 {
		total = 7
	}
	return min(float64(max(slices, 1))/float64(total), 1)
}

// ShareFraction is an MPS share's part of its GPU: the larger of its
// memory's part and its compute percent (20 GiB of 80 GiB: 1/4).
func ShareFraction(shareMiB, gpuMiB int64, compute int) float64 {
	f := float64(compute) / 100
	if gpuMiB > 0 {
		f = max(f, float64(shareMiB)/float64(gpuMiB))
	}
	return min(max(f, 0), 1)
}

// Equivalents is what placements hold in GPU-equivalents: a whole GPU
// counts 1, a part its Fraction.
func Equivalents(ps []Placement) float64 {
	e := 0.0
	for _, p := range ps {
		if p.Part != nil {
			e += p.Part.Fraction
			continue
		}
		e += float64(len(p.GPUs))
	}
	return e
}

// hasPart reports whether a running job holds a part of a GPU.
func hasPart(r *Running) bool {
	for _, p := range r.Placements {
		if p.Part != nil {
			return true
		}
	}
	return false
}

// partGPU is a cycle's working copy of one MIG or shared GPU.
type partGPU struct {
	n, g   int // node position, position in its GPUs
	slices []Slice
	free   int // free slices
	share  *Share
}

// partKey is what finding a part depends on, besides the parts' state: a
// job of the same key fits, or does not, the same parts (jobs with node
// labels are not remembered).
type partKey struct {
	profile       string
	min, shareMiB int64
	compute       int
	typ, user     string // user: a share's (one user per MPS server)
}

// partMemo is what a cycle learned of a key: it did not fit, and why; at
// is the version it was learned at where bookings make that matter (1 +
// the parts' and the index's versions), else 0.
type partMemo struct {
	at  int
	why Pending
}

// partsOf lists the cluster's MIG GPUs and its shared GPUs, each in node
// order, with copies of their state the cycle may change; and how many
// MIG GPUs have each count of free slices.
func partsOf(ix *index) (migs, shares []partGPU, hist []int) {
	migs, shares = []partGPU{}, []partGPU{}
	for n := range ix.nodes {
		gs := ix.nodes[n].node.GPUs
		for g := range gs {
			switch {
			case gs[g].MIG != nil:
				pg := partGPU{n: n, g: g, slices: append([]Slice(nil), gs[g].MIG...)}
				for _, sl := range pg.slices {
					if sl.Free {
						pg.free++
					}
				}
				for len(hist) <= pg.free {
					hist = append(hist, 0)
				}
				hist[pg.free]++
				migs = append(migs, pg)
			case gs[g].Share != nil:
				sh := *gs[g].Share
				shares = append(shares, partGPU{n: n, g: g, share: &sh})
			}
		}
	}
	return migs, shares, hist
}

// partsFor is the GPUs that could hold the job's part: the MIG GPUs for
// a slice, the shared ones for a share.
func (c *cycle) partsFor(j *Job) []partGPU {
	if c.migParts == nil {
		c.migParts, c.shareParts, c.freeHist = partsOf(c.ix)
	}
	if j.MIGProfile != "" {
		return c.migParts
	}
	return c.shareParts
}

// fewestFree is the fewest free slices any MIG GPU with a free one has:
// a slice there cannot be beaten on packing.
func (c *cycle) fewestFree() int {
	for f := 1; f < len(c.freeHist); f++ {
		if c.freeHist[f] > 0 {
			return f
		}
	}
	return 0
}

// partOK reports whether the job may have a part of GPU g (a position)
// of node n (a position): the node takes new jobs, has the job's labels,
// and the GPU is of the job's type.
func (ix *index) partOK(n, g int, j *Job) bool {
	ns := &ix.nodes[n]
	return ns.node.Schedulable && (len(j.NodeLabels) == 0 || ix.labelsOK(n, j)) &&
		(j.GPUType == "" || containsFold(ns.node.GPUs[g].Model, j.GPUType))
}

// sliceFits reports whether the slice is of the profile the job asks for.
func sliceFits(s *Slice, j *Job) bool {
	if strings.EqualFold(j.MIGProfile, MIGAny) {
		return s.MemoryMiB >= j.MinMemoryMiB
	}
	return strings.EqualFold(s.Profile, j.MIGProfile)
}

// findPart chooses the part of a GPU the job gets now: a slice (the best
// fitting free one, on the GPU with the fewest free slices), or a share
// (on the fullest shared GPU that still fits it, by memory then
// compute). It returns the position in c.partsFor(j) and the slice's position
// (-1 for a share), or ok false.
func (c *cycle) findPart(j *Job) (k, s int, ok bool) {
	type score struct{ a, b, d int64 }
	less := func(x, y score) bool {
		if x.a != y.a {
			return x.a < y.a
		}
		if x.b != y.b {
			return x.b < y.b
		}
		return x.d < y.d
	}
	var best score
	k, s = -1, -1
	any := strings.EqualFold(j.MIGProfile, MIGAny)
	fewest := c.fewestFree()
	parts := c.partsFor(j)
	for i := range parts {
		pg := &parts[i]
		ns := &c.ix.nodes[pg.n]
		gpu := &ns.node.GPUs[pg.g]
		if !c.ix.partOK(pg.n, pg.g, j) {
			continue
		}
		if j.MIGProfile != "" {
			if pg.free == 0 {
				continue
			}
			free := pg.free
			for si := range pg.slices {
				sl := &pg.slices[si]
				if !sl.Free || !sliceFits(sl, j) {
					continue
				}
				sc := score{a: int64(free)}
				if any {
					sc = score{a: sl.MemoryMiB, b: int64(sl.ComputeSlices), d: int64(free)}
				}
				if k < 0 || less(sc, best) {
					k, s, best = i, si, sc
				}
			}
			if k >= 0 && !any && best.a <= int64(fewest) {
				break // no GPU has fewer free slices: none packs better
			}
			continue
		}
		sh := pg.share
		if sh == nil {
			continue
		}
		if sh.UsedMiB == 0 && sh.UsedCompute == 0 && sh.User == "" {
			if !ns.avail(pg.g) { // a whole job or a hold has it
				continue
			}
		} else if sh.User != j.User {
			continue // one MPS server never serves two users
		}
		leftMiB := gpu.MemoryMiB - sh.UsedMiB - j.ShareMiB
		leftCompute := 100 - sh.UsedCompute - j.ShareCompute
		if leftMiB < 0 || leftCompute < 0 {
			continue
		}
		sc := score{a: leftMiB, b: int64(leftCompute)}
		if k < 0 || less(sc, best) {
			k, s, best = i, -1, sc
		}
	}
	return k, s, k >= 0
}

// startPart places a job that asks for a part of a GPU, or leaves it
// waiting with a reason. Such a job never borrows beyond a quota, holds
// no reservation and preempts nothing.
func (c *cycle) startPart(j *Job) bool {
	if q := c.overQuotaBy(j, quotaEps*2); q != "" { // no part at all fits
		c.pendQuota(j, q)
		return false
	}
	// Within a cycle the parts only ever fill up (slices and shares are
	// taken, whole jobs take free shared GPUs; nothing is freed), so a key
	// that did not fit never will: remembered for the cycle. Only bookings
	// make the GPUs open to a job depend on the job (its window).
	key, memo := c.partKeyOf(j)
	v := 0
	if c.bk != nil {
		v = c.ix.version + c.partsVersion + 1
	}
	if m, seen := c.partMemo[key]; memo && seen && m.at == v && !c.mayPreemptSlice(j) {
		why := m.why
		why.JobID = j.ID
		c.pend(why) // as the same key's last job, nothing having changed
		return false
	}
	k, s, ok := c.findPart(j)
	if !ok && c.preemptSlice(j) { // slicepreempt.go
		return false
	}
	if !ok {
		c.pendPart(j)
		if memo {
			c.partMemo[key] = partMemo{at: v, why: c.out.Pending[len(c.out.Pending)-1]}
		}
		return false
	}
	pg := &c.partsFor(j)[k]
	ns := &c.ix.nodes[pg.n]
	gpu := &ns.node.GPUs[pg.g]
	frac := ShareFraction(j.ShareMiB, gpu.MemoryMiB, j.ShareCompute)
	if s >= 0 {
		total := gpu.MIGSlices
		if total == 0 {
			for _, x := range pg.slices {
				total += max(x.ComputeSlices, 1)
			}
		}
		frac = SliceFraction(pg.slices[s].ComputeSlices, total)
	}
	if q := c.overQuotaBy(j, frac); q != "" {
		c.pendQuota(j, q)
		return false
	}
	c.partsVersion++
	var part Part
	if s >= 0 {
		sl := &pg.slices[s]
		sl.Free, sl.Holder = false, j.ID
		c.freeHist[pg.free]--
		pg.free--
		c.freeHist[pg.free]++
		part = Part{MIG: sl.Index, Profile: sl.Profile, Fraction: frac}
	} else {
		sh := pg.share
		if sh.User == "" && ns.free[pg.g] {
			c.ix.take([]Placement{{NodeID: ns.node.ID, GPUs: []int{gpu.Index}}}) // no whole job takes it now
		}
		sh.UsedMiB += j.ShareMiB
		sh.UsedCompute += j.ShareCompute
		sh.User = j.User
		sh.Holders = append(sh.Holders[:len(sh.Holders):len(sh.Holders)], j.ID)
		part = Part{MIG: -1, ShareMiB: j.ShareMiB, ShareCompute: j.ShareCompute, Fraction: frac}
	}
	c.record(j, []Placement{{NodeID: ns.node.ID, GPUs: []int{gpu.Index}, Part: &part}}, false)
	return true
}

// pendQuota leaves a slice or share job waiting over its quota.
func (c *cycle) pendQuota(j *Job, q string) {
	c.pend(Pending{JobID: j.ID, Reason: ReasonQuota, note: textNote(q + "; a GPU slice or share never borrows")})
}

// partKeyOf is the job's key, and whether it may be remembered.
func (c *cycle) partKeyOf(j *Job) (partKey, bool) {
	if len(j.NodeLabels) > 0 {
		return partKey{}, false
	}
	if c.partMemo == nil {
		c.partMemo = map[partKey]partMemo{}
	}
	k := partKey{profile: j.MIGProfile, min: j.MinMemoryMiB, shareMiB: j.ShareMiB, compute: j.ShareCompute, typ: j.GPUType}
	if j.MIGProfile == "" {
		k.user = j.User
	}
	return k, true
}

// pendPart says why a slice or share job waits: no GPU could ever give
// it its part (unsatisfiable), or those that could are taken, and by whom.
func (c *cycle) pendPart(j *Job) {
	var holders, where []string
	exist, held, nodesN, last := 0, 0, 0, -1
	hold := func(h string) {
		if held++; len(holders) < 8 {
			holders = append(holders, h)
		}
	}
	at := func(n int) { // the parts come in node order
		if n != last {
			if last, nodesN = n, nodesN+1; len(where) < 3 {
				where = append(where, c.ix.nodes[n].node.ID)
			}
		}
	}
	parts := c.partsFor(j)
	for i := range parts {
		pg := &parts[i]
		ns := &c.ix.nodes[pg.n]
		gpu := &ns.node.GPUs[pg.g]
		if len(j.NodeLabels) > 0 && !c.ix.labelsOK(pg.n, j) || j.GPUType != "" && !containsFold(gpu.Model, j.GPUType) {
			continue
		}
		if j.MIGProfile != "" {
			for _, sl := range pg.slices {
				if sliceFits(&sl, j) {
					exist++
					if !sl.Free && sl.Holder != "" {
						hold(sl.Holder)
					}
					at(pg.n)
				}
			}
			continue
		}
		if pg.share != nil && gpu.MemoryMiB >= j.ShareMiB {
			exist++
			for _, h := range pg.share.Holders {
				hold(h)
			}
			at(pg.n)
		}
	}
	what := fmt.Sprintf("a free %s MIG slice", j.MIGProfile)
	if strings.EqualFold(j.MIGProfile, MIGAny) {
		what = "a free MIG slice"
		if j.MinMemoryMiB > 0 {
			what += fmt.Sprintf(" with at least %g GB", float64(j.MinMemoryMiB)/1024)
		}
	}
	if j.MIGProfile == "" {
		what = fmt.Sprintf("%g GB", float64(j.ShareMiB)/1024)
		if j.ShareCompute > 0 {
			what += fmt.Sprintf(" and %d%% of the compute", j.ShareCompute)
		}
		what += " on a shared GPU"
	}
	if exist == 0 {
		c.pend(Pending{JobID: j.ID, Reason: ReasonUnsatisfiable, note: textNote("no node could ever run it: it needs " + what + " and no GPU offers one")})
		return
	}
	nodes := strings.Join(where, ", ")
	if nodesN > len(where) {
		nodes += fmt.Sprintf(" and %d more nodes", nodesN-len(where))
	}
	msg := fmt.Sprintf("needs %s; the %d on %s", what, exist, nodes)
	if j.MIGProfile == "" {
		msg = fmt.Sprintf("needs %s; the %d that could hold it (on %s)", what, exist, nodes)
	}
	are, inUse := "are", "are in use or on nodes that take no new jobs"
	if exist == 1 {
		are, inUse = "is", "is in use or on a node that takes no new jobs"
	}
	switch {
	case len(holders) > 0:
		msg += " " + are + " held by " + strings.Join(holders, ", ")
		if held > len(holders) {
			msg += fmt.Sprintf(" and %d more", held-len(holders))
		}
		if j.MIGProfile == "" {
			msg += " (or another user's shares, or a whole-GPU job)"
		}
	default:
		msg += " " + inUse
	}
	c.pend(Pending{JobID: j.ID, Reason: ReasonResources, note: textNote(msg)})
}

// wholeOnly returns the running jobs that hold whole GPUs, and adds the
// GPUs that the others (slices and shares) hold to the cycle's counts of
// each user and project, so that quotas and fair share still see them.
// Jobs with parts are then never victims and never in a timeline. The
// running list is returned as it is when no job holds a part.
func (c *cycle) wholeOnly(rs []Running) []Running {
	some := false
	for i := range rs {
		if hasPart(&rs[i]) {
			some = true
			break
		}
	}
	if !some {
		return rs
	}
	whole := make([]Running, 0, len(rs))
	var parts []Running
	for i := range rs {
		if hasPart(&rs[i]) {
			parts = append(parts, rs[i])
			continue
		}
		whole = append(whole, rs[i])
	}
	c.partRunning = parts
	return whole
}

// countParts adds the running parts to the cycle's counts (after tally
// made them): their GPU-equivalents to the quotas' and to fair share's
// in-cycle charge, as the usage ledger charges them.
func (c *cycle) countParts() {
	for i := range c.partRunning {
		r := &c.partRunning[i]
		e := Equivalents(r.Placements)
		c.addParts(r.User, r.Project, e)
		if !r.Preempting {
			c.shareUser[r.User] += e
			c.shareProject[r.Project] += e
		}
	}
}
