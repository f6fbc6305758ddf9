package orchestrator

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/sched"
)

// view copies a job for the API, adding its queue position and why it
// waits. Read lock held.
func (o *Orchestrator) view(j *api.Job, withEvents bool) api.Job {
	v := *j
	v.Env = maps.Clone(j.Env)
	v.Allocation = slices.Clone(j.Allocation)
	if v.Allocation == nil {
		v.Allocation = []api.Allocation{}
	}
	v.Events = nil
	v.Policy = o.policy.Policy
	if withEvents {
		v.Events = slices.Clone(j.Events)
	}
	if j.State == api.StateQueued {
		if p, ok := o.pending.get(j.ID); ok {
			v.QueuePosition, v.PendingReason, v.PendingMessage = p.Position, p.Reason, p.Message()
		} else if j.ArrayJobID != "" {
			o.arr.Pending(j, &v)
		}
		if sr, ok := o.plan[j.ID]; ok {
			v.EstimatedStartTime, v.EstimatedStartLow, v.EstimatedStartHigh = readview.StartRange(sr)
		}
		if reason, msg, held := o.deps.Pending(j); held {
			v.QueuePosition, v.PendingReason, v.PendingMessage = 0, reason, msg
		}
		o.holds.Note(&v)
		if !o.running {
			v.PendingReason, v.PendingMessage = "scheduling_stopped", "the orchestrator is stopped: nothing new starts until an admin runs corral orchestrator start"
		}
		// The precise reason, and the one clients before the split read.
		v.PendingCause, v.PendingReason = v.PendingReason, api.PendingReasonOf(v.PendingReason)
	}
	if j.State == api.StateQueued || j.State.Active() {
		v.EstimateBasis = o.runtimes.Basis(j, o.cfg.Now(), o.estimateFallback) // feature/runtimes
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

// JobFilter selects jobs for Jobs. Zero fields match everything.
type JobFilter struct {
	State   api.State
	User    string
	Project string
	Name    string    // the job's name, exactly
	Since   time.Time // submitted at or after
	Until   time.Time // submitted before
	Cursor  string    // only jobs whose ids sort before it (the last page's next cursor)
	Limit   int       // at most this many, newest first; 0: 1000
}

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
func (o *Orchestrator) Queue() api.QueueResponse {
	now := o.cfg.Now()
	o.mu.RLock()
	defer o.mu.RUnlock()
	r := api.QueueResponse{QueuedJobs: make([]api.QueuedJob, 0, len(o.q.queued)), Statistics: o.statistics(now)}
	for id := range o.q.queued {
		j := o.jobs[id]
		v := o.view(j, false)
		qa := queuedAt(j)
		r.QueuedJobs = append(r.QueuedJobs, api.QueuedJob{
			ID: j.ID, Number: j.Number, Name: j.Name, User: j.User, Project: j.Project, Priority: j.Priority, RequestedGPUs: j.GPUCount * j.Nodes,
			Nodes: j.Nodes, QueuedAt: qa, QueuePosition: v.QueuePosition, WaitedSeconds: now.Sub(qa).Seconds(),
			PendingReason: v.PendingReason, PendingCause: v.PendingCause, PendingMessage: v.PendingMessage, RequestedGPUsMin: j.GPUCountMin,
			ArrayJobID: j.ArrayJobID, ArrayTaskID: j.ArrayTaskID,
		})
	}
	// Positions are the last cycle's order. When some job has none (it
	// came after the cycle, or scheduling is stopped), the policy's order
	// over the queue as it is now gives them all.
	fresh := false
	for _, q := range r.QueuedJobs {
		fresh = fresh || (q.QueuePosition == 0 && q.ArrayJobID == "" && !deps.HeldReason(q.PendingReason)) || !o.running
	}
	if fresh {
		pos := map[string]int{}
		for i, j := range sched.OrderWithUsage(o.snapshot(now, o.queuedJobs(), nil)) {
			pos[j.ID] = i + 1
		}
		for i := range r.QueuedJobs {
			r.QueuedJobs[i].QueuePosition = pos[r.QueuedJobs[i].ID]
		}
	}
	deps.PositionHeld(r.QueuedJobs)          // jobs held by dependencies last
	r.Arrays = o.arr.Positions(r.QueuedJobs) // package arrays
	for i := range r.QueuedJobs {
		q := &r.QueuedJobs[i]
		j := o.jobs[q.ID]
		q.EstimatedDuration = j.EstimatedDuration
		if sr, ok := o.plan[q.ID]; ok {
			wait := max(sr.At.Sub(now).Seconds(), 0)
			q.EstimatedStartTime, q.EstimatedStartLow, q.EstimatedStartHigh = readview.StartRange(sr)
			q.EstimatedWaitTime = &wait
		}
		q.EstimateBasis = o.runtimes.Basis(j, now, o.estimateFallback) // feature/runtimes
	}
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
// have started: active ones and the last RecentFinished that ended
// (finished.go); older ones are not counted. Read lock held.
func (o *Orchestrator) statistics(now time.Time) api.QueueStatistics {
	return readview.Statistics(len(o.q.queued), o.startedJobs(), queuedAt, now)
}

// Status is GET /orchestrator/status.
func (o *Orchestrator) Status() api.OrchestratorStatus {
	o.mu.RLock()
	defer o.mu.RUnlock()
	s := api.OrchestratorStatus{Running: o.running, Policy: o.policy.Policy, Cycles: o.stats.count, LastCycleMS: o.stats.lastMS,
		QueuedJobs: len(o.q.queued), StartedAt: o.startedAt, Version: o.cfg.Version, Executors: o.executorStatus()}
	if !o.stats.last.IsZero() {
		t := o.stats.last
		s.LastCycleAt = &t
	}
	for _, j := range o.jobs {
		if j.State.Active() {
			s.RunningJobs++
		}
	}
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

// queuedJobs returns the queued jobs, in no order. Lock held.
func (o *Orchestrator) queuedJobs() []*api.Job {
	q := make([]*api.Job, 0, len(o.q.queued))
	for id := range o.q.queued {
		q = append(q, o.jobs[id])
	}
	return q
}
