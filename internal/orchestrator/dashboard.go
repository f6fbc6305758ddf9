package orchestrator

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/readview"
)

// ActiveJobs returns the jobs holding GPUs (scheduled, allocating,
// running), in submission order, without events.
func (o *Orchestrator) ActiveJobs() []api.Job {
	o.mu.RLock()
	out := make([]api.Job, 0, o.jobs.ActiveLen())
	for j := range o.jobs.Active() {
		out = append(out, o.view(j, false))
	}
	o.mu.RUnlock()
	readview.ByID(out)
	return out
}

// Dashboard is everything the dashboard shows at one moment: the status,
// the cluster, the head of the queue (DashboardQueueRows jobs; its
// statistics count them all) and the active jobs. The parts are read one after
// the other, so they may be a commit apart. The rows' waits are as of At.
func (o *Orchestrator) Dashboard(ctx context.Context) api.DashboardUpdate {
	now := o.cfg.Now()
	return api.DashboardUpdate{At: now.UTC(), Status: o.Status(), Cluster: o.Cluster(ctx), Queue: readview.PageQueue(arrays.Trim(o.queueView(), dashboardArrayRows), 0, DashboardQueueRows, now), Active: o.ActiveJobs()}
}

// dashboardArrayRows is how many of an array's queued tasks the
// dashboard's updates carry (the first in queue order): it shows an array
// as one row with its counts, and these when the row is opened.
const dashboardArrayRows = 100
