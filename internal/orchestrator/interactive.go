package orchestrator

import (
	"fmt"
	"net/http"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/jobio"
	"github.com/corral-sched/corral/internal/feature/reclaim"
)

// Defaults of the interactive limits (the server's --max-interactive-gpus
// and --max-interactive-time).
const (
	DefaultMaxInteractiveGPUs = 2
	DefaultMaxInteractiveTime = holds.DefaultTime // a hold's default duration too
)

// Interactive reports whether a job's class is one of the interactive
// classes (interactive, interactive-preemptible).
func Interactive(class string) bool { return reclaim.Interactive(class) }

// checkInteractive applies the interactive limits to a valid interactive
// submission: its time limit defaults to, and may not exceed,
// MaxInteractiveTime (a longer one is refused, not cut: 422 naming
// time_limit), and its user's interactive GPUs, queued or running, with
// holds, may not pass MaxInteractiveGPUs (429 naming the flag). Batch jobs
// pass unchanged. Loop only (it reads the queue and the running jobs).
func (o *Orchestrator) checkInteractive(j *api.Job) error {
	if !Interactive(j.Class) {
		return nil
	}
	l := o.cfg.Limits
	if l.MaxInteractiveTime > 0 {
		def := l.MaxInteractiveTime
		if l.MaxRunTime > 0 {
			def = min(def, l.MaxRunTime)
		}
		max := api.Seconds(def.Seconds())
		switch {
		case j.TimeLimit == nil:
			j.TimeLimit, j.TimeLimitFrom = &max, jobio.FromDefault
		case j.TimeLimit.Duration() > l.MaxInteractiveTime:
			return api.Invalid("time_limit", "is %s; an interactive job may run at most %s on this server (--max-interactive-time)",
				j.TimeLimit.Duration(), l.MaxInteractiveTime)
		}
	}
	if l.MaxInteractiveGPUs > 0 {
		have := o.interactiveGPUs(j.User)
		if want := j.GPUCount * j.Nodes; have+want > l.MaxInteractiveGPUs {
			return &api.Error{Status: http.StatusTooManyRequests, Code: "interactive_gpus_exceeded", Field: "gpu_count",
				Message: fmt.Sprintf("%s has %d interactive GPUs queued, running or held; %d more would pass --max-interactive-gpus (%d per user)",
					j.User, have, want, l.MaxInteractiveGPUs)}
		}
	}
	return nil
}

// interactiveGPUs counts the GPUs of a user's interactive jobs, queued or
// holding GPUs, and of their holds. A scan of the queue: interactive
// submissions are few. Lock held.
func (o *Orchestrator) interactiveGPUs(user string) int {
	n := 0
	count := func(ids map[string]bool) {
		for id := range ids {
			if j := o.jobs[id]; j != nil && j.User == user && Interactive(j.Class) {
				n += j.GPUCount * max(j.Nodes, 1)
			}
		}
	}
	count(o.q.queued)
	count(o.active)
	for h := range o.holds.All() {
		if h.User == user {
			n += len(h.Allocation)
		}
	}
	return n
}
