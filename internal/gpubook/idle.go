package gpubook

import (
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/nodebook"
)

// Idle marks the running jobs among active whose GPUs are on node n idle
// or busy from the node's last readings (nodebook.IdleRule.Apply writes
// each job's mark), and returns the jobs that went idle now and those,
// idle before, whose GPUs work again: what the loop tells (a log line,
// a notification) and acts on as its policy says. Jobs still starting
// (scheduled, allocating) are left alone.
func Idle(rule nodebook.IdleRule, n *nodebook.Node, active iter.Seq[*api.Job], at time.Time) (idle, busyAgain []*api.Job) {
	util := n.UtilByGPU()
	for j := range active {
		if j.State != api.StateRunning {
			continue
		}
		wasIdle := j.Idle
		switch rule.Apply(j, n.ID, util, at) {
		case nodebook.IdleBusy:
			if wasIdle {
				busyAgain = append(busyAgain, j)
			}
		case nodebook.IdleNow:
			idle = append(idle, j)
		}
	}
	return idle, busyAgain
}
