package orchestrator

import (
	"context"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/gpuinfo"
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
	if j := o.jobs[id]; j != nil && j.Number > 0 {
		return j.ShortID()
	}
	return id
}

func (o *Orchestrator) device(nodeID string, index int) (*Node, *gpuinfo.Device) {
	n := o.node(nodeID)
	if n == nil {
		return nil, nil
	}
	for k := range n.Devices {
		if n.Devices[k].Index == index {
			return n, &n.Devices[k]
		}
	}
	return nil, nil
}

// allocation turns placements into the API's allocation records and marks
// the GPUs as owned by id. Write lock held.
func (o *Orchestrator) allocate(id, user string, ps []sched.Placement) []api.Allocation {
	var out []api.Allocation
	for _, p := range ps {
		for _, idx := range p.GPUs {
			n, d := o.device(p.NodeID, idx)
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

// Hold takes GPUs for work run outside Corral: they go to no job until
// Release. It fails with a 409 when they are not free now.
func (o *Orchestrator) Hold(ctx context.Context, req api.AllocateRequest, user string) (api.Hold, error) {
	req.JobID = strings.TrimSpace(req.JobID)
	if req.JobID == "" {
		return api.Hold{}, api.Invalid("job_id", "is required: a name for the work that will use the GPUs")
	}
	if err := api.CheckText("job_id", req.JobID, 128); err != nil {
		return api.Hold{}, err
	}
	if req.GPUCount == 0 {
		return api.Hold{}, api.Invalid("gpu_count", "must be 1 or more: a hold of no GPUs holds nothing")
	}
	d, err := o.holds.Duration(req.Duration)
	if err != nil {
		return api.Hold{}, err
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		c := o.capacity()
		if err := jobspec.CheckGPURequest(c, "gpu_count", req.GPUCount, 1, "memory_gb", req.MemoryGB, req.GPUType); err != nil {
			return nil, err
		}
		if err := jobspec.CheckGPUPart(&req.GPUPart, req.GPUCount, 1); err != nil { // a slice or a share (package gpushare)
			return nil, err
		}
		if _, ok := o.holds.Get(req.JobID); ok {
			return nil, api.Conflict("hold_exists", "GPUs are already held for %q; release them first", req.JobID)
		}
		if _, ok := o.jobs[req.JobID]; ok {
			return nil, api.Conflict("job_exists", "%q is a Corral job; pick another name for the hold", req.JobID)
		}
		if err := o.checkHoldCap(user, limits.Asked(req.GPUCount, req.GPUPart)); req.Wait && err != nil {
			return nil, err // a hold without wait keeps the seed's answers (holds.go)
		}
		j := sched.Job{ID: req.JobID, GPUs: req.GPUCount, MinMemoryMiB: int64(req.MemoryGB * 1024), GPUType: req.GPUType,
			User: user, Class: sched.ClassInteractive, TimeLimit: d, // as a hold, kept off GPUs booked within d
			MIGProfile: req.MIGProfile, ShareMiB: req.GPUShareMiB, ShareCompute: req.GPUCompute}
		r := sched.Schedule(sched.Snapshot{Now: tx.now, Nodes: o.snapshotNodes(), Queue: []sched.Job{j}, Policy: sched.Policy{Name: sched.PolicyFCFS},
			Bookings: o.bookings.At(tx.now)}) // feature/bookings
		if len(r.Starts) == 0 && req.Wait {
			return o.queueHold(tx, req, user, d) // holds.go
		}
		if len(r.Starts) == 0 {
			return nil, api.Conflict("insufficient_gpus", "cannot hold now: %s (\"wait\": true queues the hold)", r.Pending[0].Message())
		}
		expires := tx.now.Add(d)
		h := &api.Hold{JobID: req.JobID, User: user, HeldAt: tx.now, Allocation: o.allocate(req.JobID, user, r.Starts[0].Placements), ExpiresAt: &expires}
		o.holds.Add(h)
		tx.batch.Holds = append(tx.batch.Holds, *h)
		o.log.Info("GPUs held", "hold", h.JobID, "gpus", len(h.Allocation))
		return *h, nil
	})
	if err != nil {
		return api.Hold{}, err
	}
	return v.(api.Hold), nil
}

// Release frees the GPUs of a hold; a hold queued as a job (holds.go) is
// canceled.
func (o *Orchestrator) Release(ctx context.Context, holdID string) (api.Hold, error) {
	o.mu.RLock()
	isHoldJob := o.holdJob(holdID) != nil
	o.mu.RUnlock()
	if isHoldJob {
		return o.releaseHoldJob(ctx, holdID)
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		h, ok := o.holds.Get(holdID)
		if !ok {
			if _, isJob := o.jobs[holdID]; isJob {
				return nil, api.Conflict("not_a_hold", "%q is a Corral job, not a hold; cancel it with corral cancel %s", holdID, holdID)
			}
			return nil, api.NotFound("no GPUs are held for %q", holdID)
		}
		out := o.releaseHold(tx, h) // holds.go
		o.log.Info("GPUs released", "hold", holdID)
		return out, nil
	})
	if err != nil {
		return api.Hold{}, err
	}
	return v.(api.Hold), nil
}
