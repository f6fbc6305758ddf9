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
// instead of its own count, without submitting or changing anything: the
// pure core decides and plans (EstimateStartRanges) on a snapshot of the
// queue as it is, with the job's count changed. The job keeps its
// run-time estimate (fewer GPUs may run longer; the answer does not
// guess how much). A job held by its dependencies or a budget is
// answered with its hold: GPUs do not change that. Read lock only.
func (o *Orchestrator) WhatIf(ctx context.Context, id string, gpus int) (api.WhatIf, error) {
	now := o.cfg.Now()
	o.mu.RLock()
	defer o.mu.RUnlock()
	j, ok := o.jobs[id]
	if !ok {
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
	most := 0
	for _, n := range snap.Nodes {
		most = max(most, len(n.GPUs))
	}
	if gpus < 1 || gpus > most {
		return api.WhatIf{}, api.Invalid("gpus", "%d GPUs is out of range: from 1 to %d, the GPUs of the largest node", gpus, most)
	}
	v := o.view(j, false)
	w := api.WhatIf{JobID: j.ID, GPUs: gpus, CurrentGPUs: j.GPUCount, Nodes: max(j.Nodes, 1), EstimateBasis: v.EstimateBasis}
	if deps.HeldReason(v.PendingCause) || v.PendingCause == usage.ReasonBudgetExhausted {
		w.PendingReason, w.PendingMessage = v.PendingReason, v.PendingMessage
		return w, nil
	}
	for i := range snap.Queue {
		if q := &snap.Queue[i]; q.ID == id {
			q.GPUs = gpus
			if q.GPUsMin >= gpus {
				q.GPUsMin = 0 // elastic down to fewer than it now asks for: not elastic
			}
		}
	}
	res := sched.Schedule(snap)
	for _, s := range res.Starts {
		if s.JobID == id {
			w.StartsNow = true
			t := now.UTC()
			w.EstimatedStartTime, w.EstimatedStartLow, w.EstimatedStartHigh = &t, &t, &t
			return w, nil
		}
	}
	for _, p := range res.Pending {
		if p.JobID == id {
			w.PendingReason, w.PendingMessage = api.PendingReasonOf(p.Reason), p.Message()
		}
	}
	if sr, ok := sched.EstimateStartRanges(snap, res, sched.DefaultPlanDepth)[id]; ok {
		w.EstimatedStartTime, w.EstimatedStartLow, w.EstimatedStartHigh = readview.StartRange(sr)
	}
	return w, nil
}

// whatIfQueue is the queue as a cycle would see it: in id order, without
// the jobs their dependencies hold. Read lock held.
func (o *Orchestrator) whatIfQueue() []*api.Job {
	q := o.queuedJobs()
	q = slices.DeleteFunc(q, func(j *api.Job) bool {
		_, _, held := o.deps.Pending(j)
		return held
	})
	slices.SortFunc(q, func(a, b *api.Job) int { return strings.Compare(a.ID, b.ID) })
	return q
}
