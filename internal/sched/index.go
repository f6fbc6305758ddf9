package sched

import (
	"math/bits"
	"strings"
)

// index is a cycle's working view of free GPUs, built for fast best-fit
// search: nodes whose GPUs are all alike are grouped in classes (model and
// memory), and within a class kept in buckets by free-GPU count, each a
// bitset over node positions. Finding the fullest node that still fits is
// then a scan of a few 64-bit words. Nodes with mixed GPUs are scanned one
// by one.
type index struct {
	nodes       []nodeState
	byID        map[string]int
	classes     []*class
	mixed       []int // positions of schedulable nodes with mixed GPUs
	mixedAll    []int // positions of all nodes with mixed GPUs
	schedulable int   // nodes that accept new jobs
	version     int   // bumped by every change of a GPU's state
	// drain, when not nil, is when each node's jobs are expected to end,
	// as nanoseconds after the cycle's now (0: nothing runs there, or it
	// has outrun its estimate): find scores single-node placements by it.
	drain   []int64
	foreign bool // some GPU runs a process Corral did not start
	// migNodes are the nodes of a class (position, class, GPUs in MIG
	// mode) with GPUs in MIG mode: the class's totals count those GPUs,
	// fitsEmpty takes them out.
	migNodes [][3]int
}

type nodeState struct {
	node *Node
	free []bool // by position in node.GPUs
	// blocked counts, by position, the bookings that keep the GPU from
	// the job at hand (booking.go); nil: none ever did. A GPU is
	// available (avail) when free and not blocked; nfree and the buckets
	// count available GPUs.
	blocked []int16
	nfree   int
	class   int   // -1: mixed or not schedulable
	pos     []int // GPU index -> position in node.GPUs; -1: no such GPU
	domains int   // number of NVLink domains
	// shared counts the node's GPUs that take MPS shares (GPU.Share):
	// whole-GPU jobs take them only where nothing else fits (place.go).
	shared int
}

type class struct {
	model   string
	mem     int64
	buckets []bitset // buckets[c]: schedulable nodes of the class with c free GPUs
	totals  []int    // totals[t]: nodes of the class (any state) with t GPUs
}

type bitset []uint64

func (b bitset) set(i int)   { b[i>>6] |= 1 << (i & 63) }
func (b bitset) clear(i int) { b[i>>6] &^= 1 << (i & 63) }

// each calls fn with every set position in order until fn returns false.
func (b bitset) each(fn func(int) bool) {
	for w, word := range b {
		for word != 0 {
			t := bits.TrailingZeros64(word)
			if !fn(w<<6 + t) {
				return
			}
			word &^= 1 << t
		}
	}
}

func newIndex(nodes []Node) *index {
	ix := &index{nodes: make([]nodeState, len(nodes)), byID: make(map[string]int, len(nodes))}
	words := (len(nodes) + 63) / 64
	classOf := map[[2]string]int{}
	last := -1 // the class of the last homogeneous node
	// One allocation each for every node's free flags and index positions.
	gpus, idxs := 0, 0
	for i := range nodes {
		gpus += len(nodes[i].GPUs)
		for _, gpu := range nodes[i].GPUs {
			idxs = max(idxs, gpu.Index+1)
		}
	}
	freeSlab := make([]bool, gpus)
	posSlab := make([]int, 0, min(idxs*len(nodes), 1<<20))
	for i := range nodes {
		n := &nodes[i]
		ns := nodeState{node: n, free: freeSlab[:len(n.GPUs):len(n.GPUs)], class: -1}
		freeSlab = freeSlab[len(n.GPUs):]
		maxIdx := -1
		for _, gpu := range n.GPUs {
			maxIdx = max(maxIdx, gpu.Index)
		}
		if len(posSlab)+maxIdx+1 <= cap(posSlab) {
			ns.pos = posSlab[len(posSlab) : len(posSlab)+maxIdx+1 : len(posSlab)+maxIdx+1]
			posSlab = posSlab[:len(posSlab)+maxIdx+1]
		} else {
			ns.pos = make([]int, maxIdx+1)
		}
		for k := range ns.pos {
			ns.pos[k] = -1
		}
		homogeneous, migs := true, 0 // migs: GPUs in MIG mode (never free)
		for g, gpu := range n.GPUs {
			ns.free[g] = gpu.Free
			ix.foreign = ix.foreign || gpu.Foreign
			ns.pos[gpu.Index] = g
			if gpu.Free {
				ns.nfree++
			}
			if gpu.Model != n.GPUs[0].Model || gpu.MemoryMiB != n.GPUs[0].MemoryMiB {
				homogeneous = false
			}
			if gpu.MIG != nil {
				migs++
			}
			if gpu.Share != nil {
				ns.shared++
			}
		}
		ns.domains = countDomains(n.GPUs)
		ix.byID[n.ID] = i
		if len(n.GPUs) > 0 && homogeneous {
			c := last // nodes come in runs of one kind: look the class up only when it changes
			if c < 0 || ix.classes[c].model != n.GPUs[0].Model || ix.classes[c].mem != n.GPUs[0].MemoryMiB {
				key := [2]string{n.GPUs[0].Model, itoa(n.GPUs[0].MemoryMiB)}
				var ok bool
				if c, ok = classOf[key]; !ok {
					c = len(ix.classes)
					classOf[key] = c
					ix.classes = append(ix.classes, &class{model: n.GPUs[0].Model, mem: n.GPUs[0].MemoryMiB})
				}
				last = c
			}
			cl := ix.classes[c]
			for len(cl.totals) <= len(n.GPUs) {
				cl.totals = append(cl.totals, 0)
				cl.buckets = append(cl.buckets, make(bitset, words))
			}
			cl.totals[len(n.GPUs)]++
			if migs > 0 {
				ix.migNodes = append(ix.migNodes, [3]int{i, c, migs})
			}
			if n.Schedulable {
				ns.class = c
				cl.buckets[ns.nfree].set(i)
			}
		} else if len(n.GPUs) > 0 {
			ix.mixedAll = append(ix.mixedAll, i)
			if n.Schedulable {
				ix.mixed = append(ix.mixed, i)
			}
		}
		if n.Schedulable {
			ix.schedulable++
		}
		ix.nodes[i] = ns
	}
	return ix
}

// countDomains counts the distinct NVLink domains of the GPUs.
func countDomains(gpus []GPU) int {
	n := 0
	for g := range gpus {
		seen := false
		for h := range g {
			if gpus[h].Domain == gpus[g].Domain {
				seen = true
				break
			}
		}
		if !seen {
			n++
		}
	}
	return n
}

func itoa(v int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// at returns the position of GPU index idx on node n.
func (ns *nodeState) at(idx int) (int, bool) {
	if idx < 0 || idx >= len(ns.pos) || ns.pos[idx] < 0 {
		return 0, false
	}
	return ns.pos[idx], true
}

// setFree marks one GPU free or taken, keeping the buckets right.
func (ix *index) setFree(n, g int, free bool) {
	ns := &ix.nodes[n]
	if ns.free[g] == free {
		return
	}
	was := ns.avail(g)
	ns.free[g] = free
	ix.availChanged(n, was, ns.avail(g))
}

// avail reports whether the GPU at position g is free and not blocked by
// a booking for the job at hand.
func (ns *nodeState) avail(g int) bool {
	return ns.free[g] && (ns.blocked == nil || ns.blocked[g] == 0)
}

// availChanged keeps nfree and the buckets right after a GPU of node n
// went from available (was) to now, and bumps the version.
func (ix *index) availChanged(n int, was, now bool) {
	ix.version++
	if was == now {
		return
	}
	ns := &ix.nodes[n]
	if ns.class >= 0 {
		ix.classes[ns.class].buckets[ns.nfree].clear(n)
	}
	if now {
		ns.nfree++
	} else {
		ns.nfree--
	}
	if ns.class >= 0 {
		ix.classes[ns.class].buckets[ns.nfree].set(n)
	}
}

// block adds d (1 or -1) to the count of bookings blocking GPU position
// g of node n.
func (ix *index) block(n, g int, d int16) {
	ns := &ix.nodes[n]
	if ns.blocked == nil {
		ns.blocked = make([]int16, len(ns.free))
	}
	was := ns.avail(g)
	ns.blocked[g] += d
	if now := ns.avail(g); now != was {
		ix.availChanged(n, was, now)
	}
}

// take marks the placements' GPUs taken.
func (ix *index) take(ps []Placement) {
	for _, p := range ps {
		n, ok := ix.byID[p.NodeID]
		if !ok {
			continue
		}
		for _, idx := range p.GPUs {
			if g, ok := ix.nodes[n].at(idx); ok {
				ix.setFree(n, g, false)
			}
		}
	}
}

// give marks the placements' GPUs free.
func (ix *index) give(ps []Placement) {
	for _, p := range ps {
		n, ok := ix.byID[p.NodeID]
		if !ok {
			continue
		}
		for _, idx := range p.GPUs {
			if g, ok := ix.nodes[n].at(idx); ok {
				ix.setFree(n, g, true)
			}
		}
	}
}

// matches reports whether a GPU passes the job's filters, free or not.
func matches(g *GPU, j *Job) bool {
	if g.MIG != nil {
		return false // in MIG mode: its slices are placed, never the GPU (gpushare.go)
	}
	if j.MinMemoryMiB > 0 && g.MemoryMiB < j.MinMemoryMiB {
		return false
	}
	return j.GPUType == "" || containsFold(g.Model, j.GPUType)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func (c *class) matches(j *Job) bool {
	return matches(&GPU{Model: c.model, MemoryMiB: c.mem}, j)
}

// freeMatching counts the node's free GPUs that pass the job's filters.
func (ix *index) freeMatching(n int, j *Job) int {
	ns := &ix.nodes[n]
	if ns.class >= 0 {
		if ix.classes[ns.class].matches(j) {
			return ns.nfree
		}
		return 0
	}
	c := 0
	for g := range ns.node.GPUs {
		if ns.avail(g) && matches(&ns.node.GPUs[g], j) {
			c++
		}
	}
	return c
}

func nodesWanted(j *Job) int {
	if j.Nodes < 1 {
		return 1
	}
	return j.Nodes
}

// labelsOK reports whether node n has every label the job asks for.
func (ix *index) labelsOK(n int, j *Job) bool {
	for k, v := range j.NodeLabels {
		if ix.nodes[n].node.Labels[k] != v {
			return false
		}
	}
	return true
}

// fitsEmpty reports whether the job could ever run: enough nodes (any
// state) have enough matching GPUs.
func (ix *index) fitsEmpty(j *Job) bool {
	want, fitting := nodesWanted(j), 0
	if len(j.NodeLabels) > 0 {
		for n := range ix.nodes {
			c := 0
			for g := range ix.nodes[n].node.GPUs {
				if matches(&ix.nodes[n].node.GPUs[g], j) {
					c++
				}
			}
			if ix.labelsOK(n, j) && c >= j.GPUs {
				fitting++
			}
		}
		return fitting >= want
	}
	for _, cl := range ix.classes {
		if !cl.matches(j) {
			continue
		}
		for t := j.GPUs; t < len(cl.totals); t++ {
			fitting += cl.totals[t]
		}
	}
	for _, m := range ix.migNodes { // their MIG GPUs are never the job's
		if ns := &ix.nodes[m[0]]; ix.classes[m[1]].matches(j) && len(ns.node.GPUs) >= j.GPUs && len(ns.node.GPUs)-m[2] < j.GPUs {
			fitting--
		}
	}
	for _, i := range ix.mixedAll {
		c := 0
		for g := range ix.nodes[i].node.GPUs {
			if matches(&ix.nodes[i].node.GPUs[g], j) {
				c++
			}
		}
		if c >= j.GPUs {
			fitting++
		}
	}
	if j.GPUs == 0 {
		fitting = len(ix.nodes)
	}
	return fitting >= want
}

// anySchedulable reports whether some node accepts new jobs.
func (ix *index) anySchedulable() bool { return ix.schedulable > 0 }
