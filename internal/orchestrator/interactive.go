package orchestrator

import (
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/feature/reclaim"
)

// Limits bound what users may queue and run (package limits).
type Limits = limits.Limits

// Defaults of the interactive limits (the server's --max-interactive-gpus
// and --max-interactive-time).
const (
	DefaultMaxInteractiveGPUs = limits.DefaultMaxInteractiveGPUs
	DefaultMaxInteractiveTime = limits.DefaultMaxInteractiveTime
)

// queueLimits is the limits feature over this orchestrator's queue.
func (o *Orchestrator) queueLimits() limits.Queue {
	return limits.Queue{Limits: o.cfg.Limits, Books: limitBooks{o}}
}

// checkHoldCap refuses a hold asked with "wait" that would take its
// user's interactive GPUs past the limit (package limits). Loop only.
func (o *Orchestrator) checkHoldCap(user string, n float64) error {
	return o.queueLimits().CheckHold(user, n)
}

// limitBooks is the queue as package limits reads it. Loop only.
type limitBooks struct{ o *Orchestrator }

func (b limitBooks) Queued() int              { return len(b.o.q.queued) }
func (b limitBooks) QueuedBy(user string) int { return b.o.q.byUser[user] }

// InteractiveGPUs counts the GPUs of a user's interactive jobs, queued or
// holding GPUs, and of their holds. A scan of the queue: interactive
// submissions are few.
func (b limitBooks) InteractiveGPUs(user string) float64 {
	o, n := b.o, 0.0
	count := func(ids map[string]bool) {
		for id := range ids {
			if j := o.jobs[id]; j != nil && j.User == user && reclaim.Interactive(j.Class) {
				n += limits.JobEquivalents(j)
			}
		}
	}
	count(o.q.queued)
	count(o.active)
	for h := range o.holds.All() {
		if h.User == user {
			for _, a := range h.Allocation {
				n += a.Equivalents()
			}
		}
	}
	return n
}
