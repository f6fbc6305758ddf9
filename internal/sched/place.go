package sched

import "slices"

// topologyBudget bounds how many fitting nodes a single-node placement
// inspects looking for one whose free GPUs share an NVLink domain.
const topologyBudget = 64

// drainBudget bounds how many fitting nodes a single-node placement
// inspects, scoring by end (see index.drain), for one the job would not
// keep busy any longer than its running jobs do.
const drainBudget = 16

// find places the job on free GPUs: nodesWanted distinct schedulable nodes,
// each with j.GPUs free GPUs that pass its filters. Nodes are taken fullest
// first (best fit, so whole nodes stay free for big gangs) or, with spread,
// emptiest first; for a single node, one whose GPUs fit in one NVLink
// domain is preferred over a fuller one where they would not. Scoring by
// end (index.drain set, not spread), a single-node job goes, among the
// first drainBudget such nodes in best-fit order, to the first that its
// running jobs keep busy at least until the job ends, else to the one it
// would keep busy the least longer; an empty node only when no partly
// used node fits. So small jobs pack onto fragmented nodes whose jobs end
// with theirs, and nodes about to drain become whole for gangs. A node
// where the job would fit only by taking shared GPUs (GPU.Share) comes
// after every node where it fits on plain ones: a whole job on a shared
// GPU keeps shares off it, so it takes one only when nothing else fits.
func (ix *index) find(j *Job, spread bool) ([]Placement, bool) {
	want := nodesWanted(j)
	if j.GPUs == 0 {
		var ps []Placement
		for i := range ix.nodes {
			if ix.nodes[i].node.Schedulable && len(ps) < want && ix.labelsOK(i, j) {
				ps = append(ps, Placement{NodeID: ix.nodes[i].node.ID, GPUs: []int{}})
			}
		}
		return ps, len(ps) == want
	}
	var chosen []int
	fallback, examined := -1, 0
	byEnd := ix.drain != nil && !spread
	best, bestExt := -1, int64(0) // byEnd: the node it would keep busy the least longer
	var sharedOnly []int          // nodes where the job fits only on shared GPUs too, in order
	ix.candidates(j, spread, func(n int) bool {
		if ix.nodes[n].shared > 0 && ix.plainFree(n, j) < j.GPUs {
			sharedOnly = append(sharedOnly, n)
			if want > 1 {
				return true
			}
			examined++
			return examined < topologyBudget
		}
		if want > 1 {
			chosen = append(chosen, n)
			return len(chosen) < want
		}
		examined++
		if !ix.oneDomainFit(n, j) {
			if fallback < 0 {
				fallback = n
			}
			return examined < topologyBudget
		}
		if !byEnd {
			chosen = append(chosen, n)
			return false
		}
		ns := &ix.nodes[n]
		if ns.nfree == len(ns.node.GPUs) {
			// An empty node: whoever uses it breaks a whole node.
			// Only when no busy node fits.
			if best < 0 {
				best = n
			}
			return false
		}
		ext := max(int64(j.Estimate)-ix.drain[n], 0)
		if best < 0 || ext < bestExt {
			best, bestExt = n, ext
		}
		return ext > 0 && examined < drainBudget
	})
	if best >= 0 {
		chosen = append(chosen, best)
	}
	if want == 1 && len(chosen) == 0 && fallback >= 0 {
		chosen = append(chosen, fallback)
	}
	for _, n := range sharedOnly {
		if len(chosen) == want {
			break
		}
		chosen = append(chosen, n)
	}
	if len(chosen) < want {
		return nil, false
	}
	ps := make([]Placement, 0, want)
	for _, n := range chosen {
		ps = append(ps, Placement{NodeID: ix.nodes[n].node.ID, GPUs: ix.pickGPUs(n, j)})
	}
	return ps, true
}

// candidates calls fn with each schedulable node that has at least j.GPUs
// free matching GPUs, ordered by free count (ascending, or descending with
// spread) then node position, until fn returns false.
func (ix *index) candidates(j *Job, spread bool, fn func(n int) bool) {
	top := j.GPUs
	var classes []*class
	for _, cl := range ix.classes {
		if cl.matches(j) && len(cl.buckets) > j.GPUs {
			classes = append(classes, cl)
			top = max(top, len(cl.buckets)-1)
		}
	}
	var mixed [][2]int // (free matching, node)
	for _, n := range ix.mixed {
		if c := ix.freeMatching(n, j); c >= j.GPUs && ix.labelsOK(n, j) {
			mixed = append(mixed, [2]int{c, n})
			top = max(top, c)
		}
	}
	labeled := len(j.NodeLabels) > 0
	visit := func(c int) bool {
		for _, cl := range classes {
			if c >= len(cl.buckets) {
				continue
			}
			goOn := true
			cl.buckets[c].each(func(n int) bool {
				if labeled && !ix.labelsOK(n, j) {
					return true
				}
				goOn = fn(n)
				return goOn
			})
			if !goOn {
				return false
			}
		}
		for _, m := range mixed {
			if m[0] == c && !fn(m[1]) {
				return false
			}
		}
		return true
	}
	if spread {
		for c := top; c >= j.GPUs; c-- {
			if !visit(c) {
				return
			}
		}
		return
	}
	for c := j.GPUs; c <= top; c++ {
		if !visit(c) {
			return
		}
	}
}

// oneDomainFit reports whether the node's free matching GPUs include j.GPUs
// in a single NVLink domain.
func (ix *index) oneDomainFit(n int, j *Job) bool {
	ns := &ix.nodes[n]
	if ns.domains <= 1 {
		return true
	}
	count := map[int]int{}
	for g := range ns.node.GPUs {
		gpu := &ns.node.GPUs[g]
		if ns.avail(g) && matches(gpu, j) {
			count[gpu.Domain]++
			if count[gpu.Domain] >= j.GPUs {
				return true
			}
		}
	}
	return false
}

// plainFree counts the node's available GPUs that suit the job and take
// no MPS shares.
func (ix *index) plainFree(n int, j *Job) int {
	ns, c := &ix.nodes[n], 0
	for g := range ns.node.GPUs {
		if gpu := &ns.node.GPUs[g]; gpu.Share == nil && ns.avail(g) && matches(gpu, j) {
			c++
		}
	}
	return c
}

// pickGPUs chooses the node's GPUs for the job: within the fullest NVLink
// domain that holds them all, else from the domains with the most free
// GPUs first; lowest indexes first within a domain. GPUs that take MPS
// shares are chosen only when the plain ones are too few, and then last.
func (ix *index) pickGPUs(n int, j *Job) []int {
	ns := &ix.nodes[n]
	plainOnly := ns.shared > 0 && ix.plainFree(n, j) >= j.GPUs
	ok := func(g int) bool {
		gpu := &ns.node.GPUs[g]
		return ns.avail(g) && matches(gpu, j) && (!plainOnly || gpu.Share == nil)
	}
	if ns.domains <= 1 {
		out := make([]int, 0, j.GPUs)
		for g := range ns.node.GPUs {
			if len(out) < j.GPUs && ok(g) && ns.node.GPUs[g].Share == nil {
				out = append(out, ns.node.GPUs[g].Index)
			}
		}
		for g := 0; ns.shared > 0 && g < len(ns.node.GPUs); g++ { // shared ones last, when the plain ones are too few
			if len(out) < j.GPUs && ok(g) && ns.node.GPUs[g].Share != nil {
				out = append(out, ns.node.GPUs[g].Index)
			}
		}
		return out
	}
	byDomain := map[int][]int{}
	var domains []int
	for g := range ns.node.GPUs {
		gpu := &ns.node.GPUs[g]
		if ok(g) {
			if _, ok := byDomain[gpu.Domain]; !ok {
				domains = append(domains, gpu.Domain)
			}
			byDomain[gpu.Domain] = append(byDomain[gpu.Domain], gpu.Index)
		}
	}
	// Fullest domain that fits whole; else most free first.
	slices.SortStableFunc(domains, func(a, b int) int {
		fa, fb := len(byDomain[a]) >= j.GPUs, len(byDomain[b]) >= j.GPUs
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		case fa && fb:
			return len(byDomain[a]) - len(byDomain[b])
		}
		return len(byDomain[b]) - len(byDomain[a])
	})
	out := make([]int, 0, j.GPUs)
	for _, d := range domains {
		for _, idx := range byDomain[d] {
			if len(out) == j.GPUs {
				return out
			}
			out = append(out, idx)
		}
	}
	return out
}

// largestBlock returns the most free matching GPUs on one schedulable node,
// and that node's id ("" when no node matches).
func (ix *index) largestBlock(j *Job) (int, string) {
	best, id := -1, ""
	for _, cl := range ix.classes {
		if !cl.matches(j) {
			continue
		}
		for c := len(cl.buckets) - 1; c > best; c-- {
			found := false
			cl.buckets[c].each(func(n int) bool {
				if c > best {
					best, id = c, ix.nodes[n].node.ID
				}
				found = true
				return false
			})
			if found {
				break
			}
		}
	}
	for _, n := range ix.mixed {
		if c := ix.freeMatching(n, j); c > best {
			best, id = c, ix.nodes[n].node.ID
		}
	}
	return max(best, 0), id
}

// noFit records why the job does not fit the free GPUs now (see
// noteSrc.noFitText).
func (ix *index) noFit(j *Job) *noteSrc {
	s := &noteSrc{shape: descOf(j), anySched: ix.anySchedulable()}
	switch {
	case !s.anySched:
	case s.shape.nodes == 1:
		s.largest, s.node = ix.largestBlock(j)
	default:
		ix.candidates(j, false, func(int) bool { s.fitting++; return true })
	}
	if s.anySched && ix.foreign {
		s.foreign = ix.foreignMatching(j)
	}
	return s
}

// foreignMatching counts the GPUs of schedulable nodes that would suit j
// but run a process Corral did not start.
func (ix *index) foreignMatching(j *Job) int {
	c := 0
	for n := range ix.nodes {
		ns := &ix.nodes[n]
		if !ns.node.Schedulable {
			continue
		}
		for g := range ns.node.GPUs {
			if gpu := &ns.node.GPUs[g]; gpu.Foreign && matches(gpu, j) {
				c++
			}
		}
	}
	return c
}
