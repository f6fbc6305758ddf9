package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/feature/runtimes"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/sched"
)

// view copies a job for the API, adding its queue position and why it
// waits. Read lock held.
func (o *Orchestrator) view(j *api.Job, withEvents bool) api.Job {
	var now time.Time
	if j.State == api.StateQueued || j.State.Active() { // the clock is read only for an estimate
		now = o.cfg.Now()
	}
	return o.viewAt(j, now, withEvents)
}

// viewAt is view with a queued or active job's run-time estimate's basis
// as of now. Read lock held.
func (o *Orchestrator) viewAt(j *api.Job, now time.Time, withEvents bool) api.Job {
	v := readview.Live(j, o.policy.Policy, withEvents)
	if j.State == api.StateQueued {
		if p, ok := o.pending.Get(j.ID); ok {
			v.QueuePosition, v.PendingReason, v.PendingMessage = p.Position, p.Reason, p.Message()
		} else if j.ArrayJobID != "" {
			o.arr.Pending(j, &v)
		}
		if sr, ok := o.pending.Start(j.ID); ok {
			v.EstimatedStartTime, v.EstimatedStartLow, v.EstimatedStartHigh = readview.StartRange(sr)
		}
		if reason, msg, held := o.deps.Pending(j); held {
			v.QueuePosition, v.PendingReason, v.PendingMessage = 0, reason, msg
		}
		o.holds.Note(&v)
		readview.Pending(&v, !o.running) // scheduling stopped; the precise reason, and the one clients before the split read
	}
	if j.State == api.StateQueued || j.State.Active() {
		v.EstimateBasis = o.runtimes.Basis(j, now, runtimes.MeanOr(o.estimator, o.policy.DefaultEstimate.Duration())) // feature/runtimes
	}
	return v
}

// Job returns one job with its events: from memory, or, for a job that
// ended, from the store (finished.go).
func (o *Orchestrator) Job(id string) (api.Job, error) {
	j, ok := o.jobAnywhere(id, true) // reads.go: the store without the lock
	if !ok {
		return api.Job{}, api.NotFound("no job %q", id)
	}
	return j, nil
}

// JobFilter selects jobs for Jobs and JobPage (package readview). Zero
// fields match everything.
type JobFilter = readview.JobFilter

// Jobs returns the jobs that match, newest first, without events: the
// first page of JobPage.
func (o *Orchestrator) Jobs(f JobFilter) []api.Job {
	jobs, _, err := o.JobPage(context.Background(), f) // jobs_page.go
	if err != nil {
		o.log.Warn("list jobs", "err", err)
	}
	return jobs
}

// JobState returns a job's state and current attempt, for following logs.
func (o *Orchestrator) JobState(id string) (api.State, int, bool) {
	j, ok := o.jobAnywhere(id, false) // reads.go
	if !ok {
		return "", 0, false
	}
	return j.State, j.RetryCount, true
}

// Queue is GET /queue: queued jobs in the order they will be considered.
// Under the read lock each queued job's view becomes its row, the rows
// are numbered anew when the last cycle's positions do not hold
// (readview.Unordered: the policy's order over the snapshot as it is
// now), the jobs held by their dependencies go last and the arrays take
// their places (both read the features' books); the rows are sorted
// after the lock is released.
func (o *Orchestrator) Queue() api.QueueResponse {
	now := o.cfg.Now()
	o.mu.RLock()
	r := api.QueueResponse{QueuedJobs: make([]api.QueuedJob, 0, o.jobs.Queued()), Statistics: o.statistics(now)}
	for j := range o.jobs.QueuedJobs() {
		v := o.viewAt(j, now, false)
		var plan *sched.StartRange
		if sr, ok := o.pending.Start(j.ID); ok {
			plan = &sr
		}
		r.QueuedJobs = append(r.QueuedJobs, readview.QueuedRow(&v, jobbook.QueuedAt(j), plan, now))
	}
	if readview.Unordered(r.QueuedJobs, o.running, deps.HeldReason) {
		readview.Renumber(r.QueuedJobs, sched.OrderWithUsage(o.snapshot(now, o.jobs.QueuedList(), nil)))
	}
	deps.PositionHeld(r.QueuedJobs)          // jobs held by dependencies last
	r.Arrays = o.arr.Positions(r.QueuedJobs) // package arrays
	o.mu.RUnlock()
	readview.SortQueue(r.QueuedJobs)
	return r
}

// Statistics is GET /queue/statistics.
func (o *Orchestrator) Statistics() api.QueueStatistics {
	now := o.cfg.Now()
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.statistics(now)
}

// statistics is readview.Statistics over the queue and the jobs that may
// have started: active ones and the last ended.Recent that ended
// (finished.go); older ones are not counted. Read lock held.
func (o *Orchestrator) statistics(now time.Time) api.QueueStatistics {
	return readview.Statistics(o.jobs.Queued(), o.found().Started(), jobbook.QueuedAt, now)
}

// Status is GET /orchestrator/status.
func (o *Orchestrator) Status() api.OrchestratorStatus {
	o.mu.RLock()
	defer o.mu.RUnlock()
	s := api.OrchestratorStatus{Running: o.running, Policy: o.policy.Policy, Cycles: o.stats.count, LastCycleMS: o.stats.lastMS,
		QueuedJobs: o.jobs.Queued(), StartedAt: o.startedAt, Version: o.cfg.Version, Executors: o.executorStatus()}
	if !o.stats.last.IsZero() {
		t := o.stats.last
		s.LastCycleAt = &t
	}
	s.RunningJobs = o.jobs.ActiveLen() // the active set is the jobs in an active state
	return s
}

// SetScheduling starts (on) or stops the scheduling loop. Stopped, nothing
// new starts and nothing running is touched. The switch is persisted.
func (o *Orchestrator) SetScheduling(ctx context.Context, on bool) (api.OrchestratorStatus, error) {
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		o.dirty = true // starting asks for a cycle now, even when already on
		if o.running != on {
			o.running = on
			v := "off"
			if on {
				v = "on"
			}
			if tx.batch.Settings == nil {
				tx.batch.Settings = map[string]string{}
			}
			tx.batch.Settings[settingScheduling] = v // a batch's other settings stay (holdusage.go)
			o.log.Info("scheduling switched", "on", on)
			if !on {
				o.notes.Alert(notify.AlertSchedulerStopped, tx.now, "", nil, "scheduling was stopped: no queued job starts until it is started again (corral orchestrator start)")
			}
		}
		return nil, nil
	})
	if err != nil {
		return api.OrchestratorStatus{}, err
	}
	return o.Status(), nil
}
