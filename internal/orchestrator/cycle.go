package orchestrator

import (
	"context"
	"maps"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/sched"
)

// cycle runs one scheduling cycle: snapshot, decide (the pure core), then
// commit the starts and hand them to the executor. Loop only.
func (o *Orchestrator) cycle(ctx context.Context) {
	o.dirty = false
	began := time.Now()

	// 1. Snapshot. The loop is the only writer, so it reads without a lock.
	snap := sched.Snapshot{Now: o.cfg.Now(), Nodes: o.snapshotNodes(), Policy: sched.Policy{Name: o.policy.Policy}}
	snap.Queue = make([]sched.Job, 0, len(o.queued))
	for id := range o.queued {
		j := o.jobs[id]
		snap.Queue = append(snap.Queue, sched.Job{
			ID: j.ID, User: j.User, Project: j.Project, Priority: int(j.Priority), SubmittedAt: j.SubmittedAt,
			GPUs: j.GPUCount, Nodes: j.Nodes, MinMemoryMiB: int64(j.GPUMemoryGB * 1024), GPUType: j.GPUType,
		})
	}

	// 2. Decide.
	res := sched.Schedule(snap)

	// 3. Commit: every start moves queued -> scheduled -> allocating with
	// its GPUs reserved in the books.
	o.mu.Lock()
	tx := o.begin()
	pending := make(map[string]sched.Pending, len(res.Pending))
	for _, p := range res.Pending {
		pending[p.JobID] = p
	}
	var tasks []exec.Task
	for _, s := range res.Starts {
		j := o.jobs[s.JobID]
		tx.transition(j, api.StateScheduled, api.ReasonScheduled, "")
		j.Allocation = o.allocate(j.ID, s.Placements)
		tx.transition(j, api.StateAllocating, api.ReasonAllocating, "")
		tasks = append(tasks, o.task(j, s.Placements))
	}
	o.pending = pending
	o.stats.count++
	o.stats.last = snap.Now
	o.stats.lastMS = float64(time.Since(began).Microseconds()) / 1000
	err := o.commit(ctx, tx)
	if err == nil && tx.batch.Empty() {
		o.notify() // the pending reasons changed even when no job started
	}
	o.mu.Unlock()
	if err != nil {
		o.log.Error("scheduling cycle not committed", "err", err)
		return
	}
	o.dirty = false // the cycle's own transitions call for no other cycle

	// 4. Launch, outside the lock. A launch failure is a job failure.
	for _, t := range tasks {
		o.log.Info("job starting", "job_id", t.JobID, "node", t.NodeID, "gpus", t.GPUs)
		if err := o.cfg.Executor.Start(ctx, t); err != nil {
			o.log.Warn("job failed to start", "job_id", t.JobID, "err", err)
			o.applyUpdates(ctx, []exec.Update{{JobID: t.JobID, Attempt: t.Attempt, Kind: exec.Exited, At: o.cfg.Now(), ExitCode: -1, Err: err}})
		}
	}
}

// task builds the executor's task for a job's (single-node) placement.
func (o *Orchestrator) task(j *api.Job, ps []sched.Placement) exec.Task {
	t := exec.Task{JobID: j.ID, Attempt: j.RetryCount, Command: j.Command, Workdir: j.Workdir, Env: maps.Clone(j.Env),
		LogPath: o.LogPath(j.ID, j.RetryCount), GPUs: []int{}}
	if len(ps) > 0 {
		t.NodeID = ps[0].NodeID
		t.GPUs = append(t.GPUs, ps[0].GPUs...)
	}
	for _, a := range j.Allocation {
		if a.NodeID == t.NodeID {
			t.GPUUUIDs = append(t.GPUUUIDs, a.GPUUUID)
		}
	}
	return t
}

// applyUpdates applies executor reports in one transaction. Reports about
// an attempt that is no longer current (the job was requeued or ended) are
// dropped. Loop only.
func (o *Orchestrator) applyUpdates(ctx context.Context, us []exec.Update) {
	if len(us) == 0 {
		return
	}
	o.mu.Lock()
	tx := o.begin()
	for _, u := range us {
		j, ok := o.jobs[u.JobID]
		if !ok || j.RetryCount != u.Attempt || !j.State.Active() {
			o.log.Debug("stale executor update dropped", "job_id", u.JobID, "attempt", u.Attempt, "kind", u.Kind.String())
			continue
		}
		at := u.At.UTC()
		switch u.Kind {
		case exec.Started:
			if j.State == api.StateRunning {
				continue
			}
			j.StartedAt = &at
			tx.transition(j, api.StateRunning, api.ReasonStarted, "")
			o.log.Info("job running", "job_id", j.ID, "pid", u.PID)
		case exec.Exited:
			to, reason, msg := exitOutcome(j, u.ExitCode, u.Signal, u.Err)
			j.FinishedAt = &at
			if u.Err == nil {
				code := u.ExitCode
				j.ExitCode = &code
			}
			tx.transition(j, to, reason, msg)
			o.log.Info("job ended", "job_id", j.ID, "state", string(to), "exit_code", u.ExitCode)
		}
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("executor updates not committed", "err", err)
	}
}

// queuedAt is when the job last entered the queue (its submission, or its
// latest requeue).
func queuedAt(j *api.Job) time.Time {
	for i := len(j.Events) - 1; i >= 0; i-- {
		if j.Events[i].To == api.StateQueued {
			return j.Events[i].At
		}
	}
	return j.SubmittedAt
}
