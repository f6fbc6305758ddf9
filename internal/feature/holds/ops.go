package holds

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/sched"
)

// Cluster is what a hold's operations ask of the loop's books, in the
// operation's transaction (the write lock held) unless said otherwise:
// the GPU books (feature.GPUs), and what only the loop knows of the
// jobs and of holds that became jobs.
type Cluster interface {
	feature.GPUs
	// Capacity is the cluster's capacity, as a request is checked
	// against it.
	Capacity() jobspec.Capacity
	// Job reports whether id names a job in memory, and whether that job
	// is a hold queued as a job (AsJob). Under the read lock or in a
	// transaction.
	Job(id string) (job, queuedHold bool)
	// CheckCap is the cap on the GPUs user's waiting holds may ask,
	// with req's added (package limits).
	CheckCap(user string, req api.AllocateRequest) error
	// Queue queues a hold asked with "wait" that cannot be granted now,
	// as the interactive job it becomes (AsJob), for d.
	Queue(tx feature.Tx, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error)
	// Free frees h's GPUs and charges its time to its user (Releaser);
	// it returns h released at the transaction's time.
	Free(tx feature.Tx, h *api.Hold) api.Hold
	// Cancel cancels the job a queued hold became, as any job is
	// canceled (its own op of the loop), and returns it as a hold.
	Cancel(ctx context.Context, id string) (api.Hold, error)
}

// Ops are the API's operations on holds: a hold taken now or queued,
// and its release; each one op of the loop's transaction, answered once
// durable.
type Ops struct {
	Books   *Books
	Loop    feature.Loop
	Cluster Cluster
	Log     *slog.Logger
}

// Hold takes GPUs for work run outside Corral: they go to no job until
// Release. The request is checked first, naming its field; then, in the
// loop, against the cluster's capacity, the names of holds and jobs, and
// (when it would wait) the cap on waiting holds. It fails with a 409 when
// the GPUs are not free now, unless "wait" queues it.
func (o Ops) Hold(ctx context.Context, req api.AllocateRequest, user string) (api.Hold, error) {
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
	d, err := o.Books.Duration(req.Duration)
	if err != nil {
		return api.Hold{}, err
	}
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (api.Hold, error) {
		if err := jobspec.CheckGPURequest(o.Cluster.Capacity(), "gpu_count", req.GPUCount, 1, "memory_gb", req.MemoryGB, req.GPUType); err != nil {
			return api.Hold{}, err
		}
		if err := jobspec.CheckGPUPart(&req.GPUPart, req.GPUCount, 1); err != nil { // a slice or a share (package gpushare)
			return api.Hold{}, err
		}
		if _, ok := o.Books.Get(req.JobID); ok {
			return api.Hold{}, api.Conflict("hold_exists", "GPUs are already held for %q; release them first", req.JobID)
		}
		if job, _ := o.Cluster.Job(req.JobID); job {
			return api.Hold{}, api.Conflict("job_exists", "%q is a Corral job; pick another name for the hold", req.JobID)
		}
		if err := o.Cluster.CheckCap(user, req); req.Wait && err != nil {
			return api.Hold{}, err // a hold without wait is not capped
		}
		j := sched.Job{ID: req.JobID, GPUs: req.GPUCount, MinMemoryMiB: int64(req.MemoryGB * 1024), GPUType: req.GPUType,
			User: user, Class: sched.ClassInteractive, TimeLimit: d, // as a hold, kept off GPUs booked within d
			MIGProfile: req.MIGProfile, ShareMiB: req.GPUShareMiB, ShareCompute: req.GPUCompute}
		r := o.Cluster.Place(tx, j)
		if len(r.Starts) == 0 && req.Wait {
			return o.Cluster.Queue(tx, req, user, d)
		}
		if len(r.Starts) == 0 {
			return api.Hold{}, api.Conflict("insufficient_gpus", "cannot hold now: %s (\"wait\": true queues the hold)", r.Pending[0].Message())
		}
		now := tx.Now()
		expires := now.Add(d)
		h := &api.Hold{JobID: req.JobID, User: user, HeldAt: now, Allocation: o.Cluster.Allocate(req.JobID, user, r.Starts[0].Placements), ExpiresAt: &expires}
		o.Books.Add(h)
		tx.Batch().Holds = append(tx.Batch().Holds, *h)
		o.Log.Info("GPUs held", "hold", h.JobID, "gpus", len(h.Allocation))
		return *h, nil
	})
}

// Release frees the GPUs of a hold; a hold queued as a job is canceled
// as the job it is. A job that is no hold is a 409 saying how to cancel
// it; an unknown name a 404.
func (o Ops) Release(ctx context.Context, id string) (api.Hold, error) {
	queued := feature.Read(o.Loop, func() bool { _, q := o.Cluster.Job(id); return q })
	if queued {
		return o.Cluster.Cancel(ctx, id)
	}
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (api.Hold, error) {
		h, ok := o.Books.Get(id)
		if !ok {
			if job, _ := o.Cluster.Job(id); job {
				return api.Hold{}, api.Conflict("not_a_hold", "%q is a Corral job, not a hold; cancel it with corral cancel %s", id, id)
			}
			return api.Hold{}, api.NotFound("no GPUs are held for %q", id)
		}
		out := o.Cluster.Free(tx, h)
		o.Log.Info("GPUs released", "hold", id)
		return out, nil
	})
}
