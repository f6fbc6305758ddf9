package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/sched"
)

// releaseJob frees every GPU the job holds in the books. Write lock held.
func (o *Orchestrator) releaseJob(j *api.Job) {
	o.parts.Release(j.ID, j.Allocation) // slices and shares (package gpushare)
	for _, a := range j.Allocation {
		if gpushare.Partial(&a) {
			continue
		}
		k := gpuKey{a.NodeID, a.GPUID}
		if o.owner[k] == j.ID {
			delete(o.owner, k)
		}
	}
}

// snapshotNodes is the core's view of the nodes (nodebook.Node.Snap),
// with the GPUs that are allocated or held marked not free, and the
// slices and shares of MIG and shared GPUs added. Read lock held (or
// loop).
func (o *Orchestrator) snapshotNodes() []sched.Node {
	out := make([]sched.Node, 0, o.nodes.Len())
	for i := range o.nodes.Len() {
		n := o.nodes.At(i)
		sn := n.Snap()
		for k := range sn.GPUs {
			g, d := &sn.GPUs[k], &n.Devices[k]
			_, busy := o.owner[gpuKey{n.ID, d.Index}]
			taken := busy || g.Foreign
			if busy {
				g.Free, g.Foreign = false, false
			}
			if d.Shared || d.MIG != nil { // slices and shares (package gpushare)
				o.parts.Snap(g, gpushare.Key{Node: n.ID, GPU: d.Index}, d.MIG, d.Shared, taken, o.holderLabel)
			}
		}
		out = append(out, sn)
	}
	return out
}

// holderLabel is a holder of a slice or share as people know it: the
// job's short number, else its id (a hold's name).
func (o *Orchestrator) holderLabel(id string) string {
	if j := o.jobs.Get(id); j != nil && j.Number > 0 {
		return j.ShortID()
	}
	return id
}

// allocation turns placements into the API's allocation records and marks
// the GPUs as owned by id. Write lock held.
func (o *Orchestrator) allocate(id, user string, ps []sched.Placement) []api.Allocation {
	var out []api.Allocation
	for _, p := range ps {
		for _, idx := range p.GPUs {
			n, d := o.nodes.Device(p.NodeID, idx)
			if d == nil {
				continue
			}
			a := api.Allocation{NodeID: p.NodeID, GPUID: idx, GPUUUID: d.UUID,
				MemoryGB: float64(d.MemoryMiB) / 1024, Simulated: d.Simulated || n.Simulated}
			if p.Part != nil { // a slice or a share: its own books (package gpushare)
				a = gpushare.Allocate(a, p.Part, d.MIG)
				o.parts.Take(id, user, &a)
				out = append(out, a)
				continue
			}
			o.owner[gpuKey{p.NodeID, idx}] = id
			out = append(out, a)
		}
	}
	if out == nil {
		out = []api.Allocation{}
	}
	return out
}

type Capacity = jobspec.Capacity

// capacity reads the cluster's capacity (nodebook.Book.Capacity). Read
// lock held.
func (o *Orchestrator) capacity() Capacity { return o.nodes.Capacity(o.cfg.Pools) }

// The API's operations on holds are package holds' (holds.Ops), over
// the loop and holdCluster: the methods below are their delegates.
func (o *Orchestrator) holdOps() holds.Ops {
	return holds.Ops{Books: o.holds, Loop: loop{o}, Cluster: holdCluster{o}, Log: o.log}
}

// holdCluster is what a hold's operations ask of the loop's books
// (holds.Cluster): the GPU books, the jobs, a waiting hold's cap, and
// holds queued as jobs (holds.go). Write lock held, or the read lock for
// Job.
type holdCluster struct{ o *Orchestrator }

func (c holdCluster) Place(tx feature.Tx, j sched.Job) sched.Result {
	now := tx.Now()
	return sched.Schedule(sched.Snapshot{Now: now, Nodes: c.o.snapshotNodes(), Queue: []sched.Job{j}, Policy: sched.Policy{Name: sched.PolicyFCFS},
		Bookings: c.o.bookings.At(now)}) // feature/bookings
}

func (c holdCluster) Take(_ feature.Tx, id, user string, ps []sched.Placement) []api.Allocation {
	return c.o.allocate(id, user, ps)
}

func (c holdCluster) Capacity() jobspec.Capacity { return c.o.capacity() }

func (c holdCluster) Job(id string) (job, queuedHold bool) {
	job = c.o.jobs.Get(id) != nil
	return job, c.o.holdJob(id) != nil
}

func (c holdCluster) CheckCap(user string, req api.AllocateRequest) error {
	return c.o.checkHoldCap(user, limits.Asked(req.GPUCount, req.GPUPart))
}

func (c holdCluster) Queue(tx feature.Tx, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error) {
	return c.o.queueHold(ownTxn(tx), req, user, d)
}

func (c holdCluster) Free(tx feature.Tx, h *api.Hold) api.Hold { return c.o.releaseHold(ownTxn(tx), h) }

func (c holdCluster) Cancel(ctx context.Context, id string) (api.Hold, error) {
	return c.o.releaseHoldJob(ctx, id)
}
