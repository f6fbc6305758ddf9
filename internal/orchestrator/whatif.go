package orchestrator

import (
	"context"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/usage"
)

// WhatIf answers when a queued job would start with gpus GPUs per node
// instead of its own count, without submitting or changing anything
// (readview.WhatIf). The job's view and the snapshot are taken under the
// read lock, and the core decides under it too: the snapshot is not a
// deep copy of the books (the nodes' and jobs' labels, what the features
// add to it), which the loop may change once the lock is released.
func (o *Orchestrator) WhatIf(ctx context.Context, id string, gpus int) (api.WhatIf, error) {
	now := o.cfg.Now()
	o.mu.RLock()
	defer o.mu.RUnlock()
	j := o.jobs.Get(id)
	if j == nil {
		return api.WhatIf{}, api.NotFound("no job %q", id)
	}
	if j.State != api.StateQueued {
		return api.WhatIf{}, api.Invalid("id", "job %s is %s: a what-if answers for a queued job", id, j.State)
	}
	if j.ArrayJobID != "" {
		return api.WhatIf{}, api.Invalid("id", "job %s is a task of array %s: a what-if answers for a single job", id, j.ArrayJobID)
	}
	snap := o.snapshot(now, o.whatIfQueue(), nil)
	est := o.estimates(now)
	o.arr.AddGroups(&snap, func(j *api.Job) sched.Job { return schedJob(j, est) })
	v := o.view(j, false)
	held := deps.HeldReason(v.PendingCause) || v.PendingCause == usage.ReasonBudgetExhausted
	return readview.WhatIf(snap, &v, gpus, held, now)
}

// whatIfQueue is the queue as a cycle would see it: in id order, without
// the jobs their dependencies hold. Read lock held.
func (o *Orchestrator) whatIfQueue() []*api.Job {
	q := o.jobs.QueuedList()
	q = slices.DeleteFunc(q, func(j *api.Job) bool {
		_, _, held := o.deps.Pending(j)
		return held
	})
	slices.SortFunc(q, func(a, b *api.Job) int { return strings.Compare(a.ID, b.ID) })
	return q
}
