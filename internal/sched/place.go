package sched

import (
	"fmt"
	"strings"
)

// freeMap is the cycle's working copy of which GPUs are free, so that jobs
// placed earlier in the cycle are seen by later ones.
type freeMap struct {
	nodes []Node
	index map[string]int // node id -> position in nodes
	free  [][]bool       // free[n][g]: GPU g of node n is free
}

func newFreeMap(nodes []Node) *freeMap {
	m := &freeMap{nodes: nodes, index: make(map[string]int, len(nodes)), free: make([][]bool, len(nodes))}
	for i, n := range nodes {
		m.index[n.ID] = i
		f := make([]bool, len(n.GPUs))
		for g, gpu := range n.GPUs {
			f[g] = gpu.Free
		}
		m.free[i] = f
	}
	return m
}

func (m *freeMap) take(ps []Placement) {
	for _, p := range ps {
		n := m.index[p.NodeID]
		for _, idx := range p.GPUs {
			for g, gpu := range m.nodes[n].GPUs {
				if gpu.Index == idx {
					m.free[n][g] = false
				}
			}
		}
	}
}

// matches reports whether a GPU passes the job's filters (type, memory),
// free or not.
func matches(g GPU, j *Job) bool {
	if j.MinMemoryMiB > 0 && g.MemoryMiB < j.MinMemoryMiB {
		return false
	}
	return j.GPUType == "" || strings.Contains(strings.ToLower(g.Model), strings.ToLower(j.GPUType))
}

func nodesWanted(j *Job) int {
	if j.Nodes < 1 {
		return 1
	}
	return j.Nodes
}

// place finds the job's gang: nodesWanted distinct schedulable nodes, each
// with j.GPUs free matching GPUs. Among fitting nodes it prefers the best
// fit (the fewest free matching GPUs), then the node listed first, and on a
// node the lowest GPU indexes. It returns a sentence saying why when the job
// does not fit.
func place(m *freeMap, j *Job) ([]Placement, string, bool) {
	want := nodesWanted(j)
	type cand struct{ node, free int }
	cands := make([]cand, 0, want)
	largest, largestNode := -1, ""
	for n, node := range m.nodes {
		if !node.Schedulable {
			continue
		}
		free := 0
		for g, gpu := range node.GPUs {
			if m.free[n][g] && matches(gpu, j) {
				free++
			}
		}
		if free > largest {
			largest, largestNode = free, node.ID
		}
		if free < j.GPUs {
			continue
		}
		cands = insertBestFit(cands, cand{n, free}, want, func(a, b cand) bool { return a.free < b.free })
	}
	if len(cands) < want {
		return nil, notFitting(j, largest, largestNode, len(cands)), false
	}
	ps := make([]Placement, 0, want)
	for _, c := range cands {
		node := m.nodes[c.node]
		p := Placement{NodeID: node.ID, GPUs: make([]int, 0, j.GPUs)}
		for g, gpu := range node.GPUs {
			if len(p.GPUs) == j.GPUs {
				break
			}
			if m.free[c.node][g] && matches(gpu, j) {
				p.GPUs = append(p.GPUs, gpu.Index)
			}
		}
		ps = append(ps, p)
	}
	return ps, "", true
}

// insertBestFit keeps the k best candidates seen so far in order; earlier
// candidates win ties.
func insertBestFit[T any](best []T, c T, k int, less func(a, b T) bool) []T {
	i := len(best)
	for i > 0 && less(c, best[i-1]) {
		i--
	}
	if i >= k {
		return best
	}
	if len(best) < k {
		best = append(best, c)
	}
	copy(best[i+1:], best[i:len(best)-1])
	best[i] = c
	return best
}

// describe says what the job asks for per node, e.g. "4 H100 GPUs with at
// least 40 GB each".
func describe(j *Job) string {
	s := fmt.Sprintf("%d", j.GPUs)
	if j.GPUType != "" {
		s += " " + j.GPUType
	}
	if j.GPUs == 1 {
		s += " GPU"
	} else {
		s += " GPUs"
	}
	if j.MinMemoryMiB > 0 {
		s += fmt.Sprintf(" with at least %g GB each", float64(j.MinMemoryMiB)/1024)
	}
	return s
}

func notFitting(j *Job, largest int, largestNode string, fitting int) string {
	want := nodesWanted(j)
	if largest < 0 {
		return "no node accepts new jobs (all are cordoned or down)"
	}
	if want == 1 {
		return fmt.Sprintf("needs %s on one node; the largest free block is %d on %s", describe(j), largest, largestNode)
	}
	return fmt.Sprintf("needs %s on each of %d nodes; %d nodes have that free", describe(j), want, fitting)
}

// fitsEmpty reports whether the job could run on the cluster if every GPU
// were free.
func fitsEmpty(nodes []Node, j *Job) bool {
	fitting := 0
	for _, node := range nodes {
		n := 0
		for _, g := range node.GPUs {
			if matches(g, j) {
				n++
			}
		}
		if n >= j.GPUs {
			fitting++
		}
	}
	return fitting >= nodesWanted(j)
}
