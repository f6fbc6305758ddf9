package nodebook

import (
	"iter"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/jobspec"
)

// Book is the registry of nodes: each node in the order it joined, where
// each is by id, and the loop's look at its own clock for liveness. The
// orchestrator keeps one as a shared book (the snapshot, the views and
// placement read it) and changes it from its loop with its write lock
// held. A *Node from Get, At or All is good until the next Add.
type Book struct {
	nodes []Node
	index map[string]int // node id -> position in nodes
	watch Watch          // the loop's last look at its clock (liveness.go)
}

// Get returns the node with the given id, nil when there is none.
func (b *Book) Get(id string) *Node {
	if i, ok := b.index[id]; ok {
		return &b.nodes[i]
	}
	return nil
}

// Has reports whether a node has the id.
func (b *Book) Has(id string) bool { _, ok := b.index[id]; return ok }

// Add appends a node, prepared (Node.Prepare), and returns it.
func (b *Book) Add(n Node) *Node {
	n.Prepare()
	if b.index == nil {
		b.index = map[string]int{}
	}
	b.index[n.ID] = len(b.nodes)
	b.nodes = append(b.nodes, n)
	return &b.nodes[len(b.nodes)-1]
}

// Len is the number of nodes.
func (b *Book) Len() int { return len(b.nodes) }

// At is the i-th node in the order they joined.
func (b *Book) At(i int) *Node { return &b.nodes[i] }

// All yields every node, with its position, in the order they joined.
func (b *Book) All() iter.Seq2[int, *Node] {
	return func(yield func(int, *Node) bool) {
		for i := range b.nodes {
			if !yield(i, &b.nodes[i]) {
				return
			}
		}
	}
}

// Attend is the loop's look at its own clock at t (Watch.Look): a stall
// since its last look is forgiven to every node that is up and not given
// in Config, by moving the start of its silence forward by the stall.
// It returns the stall and how many nodes it forgave.
func (b *Book) Attend(t time.Time, tick time.Duration) (time.Duration, int) {
	stall := b.watch.Look(t, tick)
	if stall == 0 {
		return 0, 0
	}
	nodes := 0
	for i := range b.nodes {
		n := &b.nodes[i]
		if n.static || n.down {
			continue
		}
		n.Forgive(stall)
		nodes++
	}
	return stall, nodes
}

// Lost is the nodes, up and not given in Config, silent at now for more
// than ttl.
func (b *Book) Lost(now time.Time, ttl time.Duration) []*Node {
	var lost []*Node
	for i := range b.nodes {
		n := &b.nodes[i]
		if !n.static && !n.down && now.Sub(n.SilentSince()) > ttl {
			lost = append(lost, n)
		}
	}
	return lost
}

// Capacity is the cluster's capacity as jobspec checks a submission
// against it: the nodes, the largest, the most memory of a GPU and the
// models, with the pools given.
func (b *Book) Capacity(pools []string) jobspec.Capacity {
	c := jobspec.Capacity{Nodes: len(b.nodes), Pools: pools}
	seen := map[string]bool{}
	for i := range b.nodes {
		n := &b.nodes[i]
		if len(n.Devices) > c.MaxGPUs || c.LargestNode == "" {
			c.MaxGPUs, c.LargestNode = max(c.MaxGPUs, len(n.Devices)), n.ID
		}
		for _, d := range n.Devices {
			c.MaxMemoryGB = max(c.MaxMemoryGB, float64(d.MemoryMiB)/1024)
			if !seen[d.Model] {
				seen[d.Model] = true
				c.Models = append(c.Models, d.Model)
			}
		}
	}
	slices.Sort(c.Models)
	return c
}

// Util is a GPU's last utilization from its node's report (Node.Util):
// node false when the node is unknown, read false when no report read it.
func (b *Book) Util(nodeID string, gpu int) (pct int, node, read bool) {
	n := b.Get(nodeID)
	if n == nil {
		return 0, false, false
	}
	pct, read = n.Util(gpu)
	return pct, true, read
}

// GPUModel is the model of a node's GPU: the device's, else the node's
// (Node.Model); "" when the node is unknown.
func (b *Book) GPUModel(nodeID string, gpu int) string {
	n := b.Get(nodeID)
	if n == nil {
		return ""
	}
	for _, d := range n.Devices {
		if d.Index == gpu {
			return d.Model
		}
	}
	return n.Model()
}
