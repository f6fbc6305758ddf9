package nodebook

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Idle says what a node's readings make of a running job's idleness.
type Idle int

const (
	IdleNone  Idle = iota // no change: not on the node, or nothing new
	IdleBusy              // its GPUs on the node work: no longer idle
	IdleBegan             // its GPUs went quiet: the idle window starts
	IdleNow               // quiet for the whole window: the job is idle
)

// IdleRule flags running jobs whose GPUs stay under Threshold percent of
// utilization for Window.
type IdleRule struct {
	Threshold int
	Window    time.Duration
}

// Check is what util (GPU index -> utilization, as read on node at at)
// makes of running job j: busy when any of its GPUs there is unread or at
// the threshold or above; otherwise quiet since j.IdleSince, idle once
// that is Window ago. It changes nothing.
func (r IdleRule) Check(j *api.Job, node string, util map[int]int, at time.Time) Idle {
	mine, busy := false, false
	for _, a := range j.Allocation {
		if a.NodeID == node {
			mine = true
			if u, ok := util[a.GPUID]; !ok || u >= r.Threshold {
				busy = true
			}
		}
	}
	switch {
	case !mine:
		return IdleNone
	case busy:
		return IdleBusy
	case j.IdleSince == nil:
		return IdleBegan
	case !j.Idle && at.Sub(*j.IdleSince) >= r.Window:
		return IdleNow
	}
	return IdleNone
}

// Apply is Check, with what it found written on j: busy clears its idle
// flag and the start of its quiet; began starts the quiet at at; now
// flags it idle. The caller says so (a log line, a notification) and
// acts on an idle job as its policy says.
func (r IdleRule) Apply(j *api.Job, node string, util map[int]int, at time.Time) Idle {
	c := r.Check(j, node, util, at)
	switch c {
	case IdleBusy:
		j.Idle, j.IdleSince = false, nil
	case IdleBegan:
		t := at
		j.IdleSince = &t
	case IdleNow:
		j.Idle = true
	}
	return c
}

// UtilByGPU is the node's last readings as GPU index -> utilization, as
// IdleRule.Check reads them.
func (n *Node) UtilByGPU() map[int]int {
	util := make(map[int]int, len(n.readings))
	for _, r := range n.readings {
		util[r.Index] = r.Utilization
	}
	return util
}
