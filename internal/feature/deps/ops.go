package deps

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Ops are the API's operations on dependencies: a queued job's
// depends_on changed, one op of the loop's transaction, answered once
// durable.
type Ops struct {
	Tracker *Tracker
	Loop    feature.Loop
	// View is a job as the API shows it (the loop's read view). Write
	// lock held.
	View func(j *api.Job) api.Job
}

// Set replaces the depends_on of the queued job id (raw "" removes it),
// checked as at submission and also for cycles through the jobs that
// depend on it. The job's row is rewritten; no state changes, so there
// is no event (the API's audit trail records the call). Only a queued
// job: 404 when there is none, 409 wrong_state otherwise.
func (o Ops) Set(ctx context.Context, id, raw string) (api.Job, error) {
	return feature.Do(ctx, o.Loop, func(tx feature.Tx) (api.Job, error) {
		t := o.Tracker
		j := t.jobs.Get(id)
		if j == nil {
			return api.Job{}, api.NotFound("no job %q", id)
		}
		if j.State != api.StateQueued {
			return api.Job{}, api.Conflict("wrong_state", "job %s is %s: only a queued job's dependencies can change", id, j.State)
		}
		old := j.DependsOn
		if err := t.Set(j, raw, j.ArrayJobID != ""); err != nil {
			return api.Job{}, err
		}
		if j.DependsOn != old {
			o.Loop.Touch(tx, j)
			o.Loop.Replan()
			t.log.Info("job dependency changed", "job_id", id, "depends_on", j.DependsOn)
		}
		return o.View(j), nil
	})
}
