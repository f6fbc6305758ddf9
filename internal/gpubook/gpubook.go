// Package gpubook keeps the GPU books: the nodes (a nodebook.Book), who
// owns each whole GPU (a job or a hold), and who holds each MIG slice and
// MPS share (gpushare.Books), with their rules: placements turned into
// allocations and given to their holder, a holder's GPUs released, the
// core's view of the nodes with every owned or foreign GPU marked not
// free, the per-GPU holders GET /cluster/gpu-status shows, what a hold
// asks of the books (Place, then Allocate), the owners rebuilt from the
// stored allocations at recovery, and a node's readings marking the
// running jobs on its GPUs idle or busy again.
//
// The orchestrator keeps one Book as a shared book and does the rest
// around it: the op and its transaction, the rows stored, the executor's
// calls, alerts and log lines. The Book has no lock of its own: the
// orchestrator's lock guards it as it guards its other books (written by
// the loop with the write lock held, read under the read lock). What the
// Book reads of the job books it is given as data (Jobs, a running job's
// sequence), never the job books themselves.
package gpubook

import (
	"iter"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/sched"
)

// Key names one GPU of one node.
type Key = gpushare.Key

// Jobs looks a job up by id in the job books: nil when there is none (a
// hold's id, or a job that left memory).
type Jobs func(id string) *api.Job

// Book is the GPU books: the nodes, the owner of each whole GPU, and the
// holders of slices and shares (never in the owners). Not safe for
// concurrent use (the package doc says who guards it). Make it with New.
type Book struct {
	nodes nodebook.Book
	owner map[Key]string  // a whole GPU -> the job or hold that owns it
	parts *gpushare.Books // MIG slices and MPS shares held
}

// New returns books with no node and no GPU owned.
func New() *Book {
	return &Book{owner: map[Key]string{}, parts: gpushare.New()}
}

// Nodes is the registry of nodes the GPUs live on. The orchestrator
// changes it from its loop (registration, reports, cordons, recovery).
func (b *Book) Nodes() *nodebook.Book { return &b.nodes }

// Owner is the job or hold that owns the whole GPU, "" when none does.
func (b *Book) Owner(node string, gpu int) string { return b.owner[Key{Node: node, GPU: gpu}] }

// GPUModel is the model of a node's GPU (nodebook.Book.GPUModel), ""
// when unknown: with Owner, what the usage ledger reads of a GPU.
func (b *Book) GPUModel(node string, gpu int) string { return b.nodes.GPUModel(node, gpu) }

// Capacity is the cluster's capacity as a submission is checked against
// it (nodebook.Book.Capacity), within the pools when given.
func (b *Book) Capacity(pools []string) jobspec.Capacity { return b.nodes.Capacity(pools) }

// Allocate turns placements into the API's allocation records and gives
// their GPUs to id (user's): a whole GPU to its owner, a part of one
// (slice or share) to gpushare's books. A GPU the nodes no longer list is
// skipped. The result is never nil.
func (b *Book) Allocate(id, user string, ps []sched.Placement) []api.Allocation {
	var out []api.Allocation
	for _, p := range ps {
		for _, idx := range p.GPUs {
			n, d := b.nodes.Device(p.NodeID, idx)
			if d == nil {
				continue
			}
			a := api.Allocation{NodeID: p.NodeID, GPUID: idx, GPUUUID: d.UUID,
				MemoryGB: float64(d.MemoryMiB) / 1024, Simulated: d.Simulated || n.Simulated}
			if p.Part != nil {
				a = gpushare.Allocate(a, p.Part, d.MIG)
				b.parts.Take(id, user, &a)
				out = append(out, a)
				continue
			}
			b.owner[Key{Node: p.NodeID, GPU: idx}] = id
			out = append(out, a)
		}
	}
	if out == nil {
		out = []api.Allocation{}
	}
	return out
}

// Release frees every GPU and part of one that id holds among its
// allocations: a job that ends or is queued again, a hold released. A GPU
// another holder owns by now is left to it.
func (b *Book) Release(id string, as []api.Allocation) {
	b.parts.Release(id, as)
	for i := range as {
		a := &as[i]
		if gpushare.Partial(a) {
			continue
		}
		k := Key{Node: a.NodeID, GPU: a.GPUID}
		if b.owner[k] == id {
			delete(b.owner, k)
		}
	}
}

// Own gives id (user's) the GPUs of allocations it already holds: at
// recovery, a job adopted from the previous server or a stored hold.
func (b *Book) Own(id, user string, as []api.Allocation) {
	for i := range as {
		a := as[i]
		if !b.parts.Take(id, user, &a) {
			b.owner[Key{Node: a.NodeID, GPU: a.GPUID}] = id
		}
	}
}

// CountOn counts the jobs among running that are placed on the node,
// jobs of no GPUs included (nodebook.Placed): what a draining node waits
// for.
func CountOn(nodeID string, running iter.Seq[*api.Job]) int {
	c := 0
	for range On(nodeID, running) {
		c++
	}
	return c
}

// On is the jobs among running that are placed on the node, jobs of no
// GPUs included (nodebook.Placed), in running's order: what a lost node
// takes with it.
func On(nodeID string, running iter.Seq[*api.Job]) iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for j := range running {
			if nodebook.Placed(j, nodeID) && !yield(j) {
				return
			}
		}
	}
}

// State is node n's state for the API (nodebook.Node.State). Its jobs,
// those of active placed on it, are counted only when it drains: a view
// of a large cluster asks every node.
func State(n *nodebook.Node, active iter.Seq[*api.Job]) string {
	return n.State(func() int { return CountOn(n.ID, active) })
}
