package orchestrator

import (
	"github.com/corral-sched/corral/internal/feature/limits"
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
	return limits.Queue{Limits: o.cfg.Limits, Books: o.jobs, Holds: o.holds}
}

// checkHoldCap refuses a hold asked with "wait" that would take its
// user's interactive GPUs past the limit (package limits). Loop only.
func (o *Orchestrator) checkHoldCap(user string, n float64) error {
	return o.queueLimits().CheckHold(user, n)
}
