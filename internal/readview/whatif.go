package readview

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// WhatIf answers when the queued job v would start with gpus GPUs per
// node instead of its own count: the pure core decides and plans
// (sched.EstimateStartRanges) on snap, the queue as a cycle would see it
// at now (v among it), with v's count changed. The job keeps its run-time
// estimate (fewer GPUs may run longer; the answer does not guess how
// much). A job held (by its dependencies or a budget: GPUs do not change
// that) is answered with its hold. gpus out of the range of the largest
// node is a 422 naming the field. snap's queue is changed.
func WhatIf(snap sched.Snapshot, v *api.Job, gpus int, held bool, now time.Time) (api.WhatIf, error) {
	most := 0
	for _, n := range snap.Nodes {
		most = max(most, len(n.GPUs))
	}
	if gpus < 1 || gpus > most {
		return api.WhatIf{}, api.Invalid("gpus", "%d GPUs is out of range: from 1 to %d, the GPUs of the largest node", gpus, most)
	}
	w := api.WhatIf{JobID: v.ID, GPUs: gpus, CurrentGPUs: v.GPUCount, Nodes: max(v.Nodes, 1), EstimateBasis: v.EstimateBasis}
	if held {
		w.PendingReason, w.PendingMessage = v.PendingReason, v.PendingMessage
		return w, nil
	}
	for i := range snap.Queue {
		if q := &snap.Queue[i]; q.ID == v.ID {
			q.GPUs = gpus
			if q.GPUsMin >= gpus {
				q.GPUsMin = 0 // elastic down to fewer than it now asks for: not elastic
			}
		}
	}
	res := sched.Schedule(snap)
	for _, s := range res.Starts {
		if s.JobID == v.ID {
			w.StartsNow = true
			t := now.UTC()
			w.EstimatedStartTime, w.EstimatedStartLow, w.EstimatedStartHigh = &t, &t, &t
			return w, nil
		}
	}
	for _, p := range res.Pending {
		if p.JobID == v.ID {
			w.PendingReason, w.PendingMessage = api.PendingReasonOf(p.Reason), p.Message()
		}
	}
	if sr, ok := sched.EstimateStartRanges(snap, res, sched.DefaultPlanDepth)[v.ID]; ok {
		w.EstimatedStartTime, w.EstimatedStartLow, w.EstimatedStartHigh = StartRange(sr)
	}
	return w, nil
}
