package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/feature/runtimes"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/policy"
	"github.com/corral-sched/corral/internal/sched"
)

// planEvery bounds how often a large queue's start estimates are redone;
// small queues are planned every cycle.
const (
	planEvery      = 2 * time.Second
	planSmallQueue = 1000
)

// snapshot builds the core's input from live state, with the queued jobs
// queue, in that order; its Queue is appended to buf[:0]. The caller holds
// a lock, or is the loop (the only writer).
func (o *Orchestrator) snapshot(now time.Time, queue []*api.Job, buf []sched.Job) sched.Snapshot {
	snap := sched.Snapshot{Now: now, Nodes: o.gpus.Snapshot(o.jobs.Get), Policy: policy.Sched(o.policy), Usage: o.ledger.Usage(now)}
	est := o.estimates(now)
	snap.Running = make([]sched.Running, 0, o.jobs.ActiveLen())
	for j := range o.jobs.Active() {
		r := jobbook.SchedRunning(j, now)
		est(j).ApplyRunning(&r)
		snap.Running = append(snap.Running, r)
	}
	snap.Queue = slices.Grow(buf[:0], len(queue))
	admit := o.arr.Admit()
	for _, j := range queue {
		if j.ArrayJobID != "" && (arrays.Grouped(j) || !admit(j)) {
			continue // by array (snapshotGroups), or held by its throttle
		}
		snap.Queue = append(snap.Queue, schedJob(j, est))
	}
	for _, p := range o.on.snapshot { // features.go: holds, bookings, caps
		p.AddToSnapshot(&snap, now)
	}
	// The running attempts' GPU time (and holds') counts toward fair
	// share now.
	sched.ChargeRunning(snap.Usage, snap.Running, now)
	return snap
}

// snapshotGroups is snapshot with the arrays' waiting tasks added
// (package arrays' AddGroups), then gated (features.go: budgets hold
// what they must), and the arrays' groups by their entry's id.
func (o *Orchestrator) snapshotGroups(now time.Time, queue []*api.Job, buf []sched.Job) (sched.Snapshot, arrays.Groups) {
	snap := o.snapshot(now, queue, buf)
	est := o.estimates(now)
	groups := o.arr.AddGroups(&snap, func(j *api.Job) sched.Job { return schedJob(j, est) })
	for _, g := range o.on.gate {
		g.GateQueue(snap.Queue, now)
	}
	return snap, groups
}

// estimates returns each job's run-time estimate for a snapshot at now
// (feature/runtimes: given, else learned, else its user's mean run time,
// else the policy's default). Loop only, or a read that builds a
// snapshot: the estimator must not learn while it is used.
func (o *Orchestrator) estimates(now time.Time) func(j *api.Job) runtimes.Estimate {
	return o.runtimes.Estimator(now, runtimes.MeanOr(o.estimator, o.policy.DefaultEstimate.Duration()))
}

// splitQueue is the queue size past which a cycle decides without the
// write lock (cycle). Below it a decision takes a few milliseconds, less
// than the second commit a split costs: bench start (3,000 queued jobs of
// a few milliseconds each on 8 GPUs) started 15-20% fewer jobs a second
// when the split began at 1,000.
const splitQueue = SyncQueueView

// cycle runs one scheduling cycle: apply the executor's reports us, take a
// snapshot, decide (the pure core), then commit the reports, the starts
// and the preemptions in one transaction and hand the starts to the
// executor. Loop only.
//
// Nothing is seen before it is durable: the write lock is held from the
// reports to their commit. With a small queue the decision is quick and
// the lock is held across it, so that reports and decisions share one
// commit. Past splitQueue jobs the decision takes long (0.1 s or more at
// 100,000 queued on 2 cores), and readers waiting on the lock for it is what made
// GET /jobs slow beside a large queue: the reports are then committed
// first, and the core decides with no lock held. That is safe because the
// loop is the only writer (orchestrator.go): nothing the snapshot was
// taken from changes until the loop takes the lock again to apply the
// decisions, so they need no second check (the Kubernetes scheduler's
// assume/bind split, without its conflicts).
func (o *Orchestrator) cycle(ctx context.Context, us []exec.Update) {
	o.dirty = false

	// 1. Apply the reports (the GPUs of ended jobs are this cycle's to
	// hand out) and snapshot.
	o.mu.Lock()
	tx := o.begin()
	o.applyUpdatesTx(tx, us)
	began := time.Now()
	now := o.cfg.Now()
	snap, groups := o.snapshotGroups(now, o.on.eligibleQueue(tx, o.jobs.QueueOrder()), o.stats.buf) // features.go: jobs with unmet dependencies wait outside
	var reports *txn                                                                                // committed before the decision (split)
	splitMax, deciding := splitQueue, o.test.deciding
	if o.test.splitMax > 0 {
		splitMax = o.test.splitMax
	}
	if arrays.QueueSize(snap.Queue) > splitMax {
		err := o.commit(ctx, tx)
		o.mu.Unlock()
		if err != nil {
			o.log.Error("executor updates not committed", "err", err)
			return
		}
		reports = tx
	}

	// 2. Decide.
	if deciding != nil {
		deciding()
	}
	res := sched.Schedule(snap)
	var plan map[string]sched.StartRange
	if arrays.QueueSize(snap.Queue) <= planSmallQueue || now.Sub(o.pending.Planned()) >= planEvery {
		plan = sched.EstimateStartRanges(snap, res, sched.DefaultPlanDepth)
	}
	// The core keeps nothing of its input: the next cycle reuses it
	// (what it still points to, jobs' strings and maps, o.jobs holds).
	o.stats.buf = snap.Queue[:0]
	if reports != nil {
		o.mu.Lock()
		tx = o.begin()
	}

	// 3. Commit: every start moves queued -> scheduled -> allocating with
	// its GPUs reserved in the books; every victim is marked preempting.
	// The reasons replace the last cycle's.
	o.pending.Reset(res.Pending)
	o.arr.NotePending(groups, &res)
	var tasks []exec.Task
	for _, s := range res.Starts {
		j := o.arr.Next(o.jobs.Get(s.JobID), groups) // an array's group stands for its tasks
		tx.transition(j, api.StateScheduled, api.ReasonScheduled, "")
		j.Allocation = o.gpus.Allocate(j.ID, j.User, s.Placements)
		j.NodeID = nodebook.PlacedNode(s.Placements) // a job of no GPUs has no other record of it
		j.GrantedGPUs = len(j.Allocation)
		j.GPUEquivalents = gpushare.Equivalents(j.Allocation)
		j.Borrowed = s.Borrowed
		o.bookings.Started(tx, s.Booking) // feature/bookings
		msg := ""
		if s.Borrowed {
			msg = "on idle GPUs borrowed beyond its quota; they are the first taken back"
		}
		tx.transition(j, api.StateAllocating, api.ReasonAllocating, msg)
		tasks = append(tasks, o.task(j, s.Placements))
	}
	for _, p := range res.Preemptions {
		o.preempt(ctx, tx, p)
	}
	o.expire(ctx, tx, res.Expired) // bookings.go
	if plan != nil {
		o.pending.Plan(plan, now)
	}
	o.stats.count++
	o.stats.last = now
	o.stats.lastMS = float64(time.Since(began).Microseconds()) / 1000
	o.hist.ObserveCycle(time.Since(began))
	err := o.commit(ctx, tx)
	if err == nil && tx.batch.Empty() {
		o.notify() // the pending reasons changed even when no job started
	}
	o.mu.Unlock()
	if reports != nil {
		o.runAfter(ctx, reports)
	}
	if err != nil {
		o.log.Error("scheduling cycle not committed", "err", err)
		return
	}
	o.dirty = false // the cycle's own transitions call for no other cycle

	// 4. Launch and warn, outside the lock. A launch failure is a job failure.
	for _, t := range tasks {
		o.log.Info("job starting", "job_id", t.JobID, "node", t.NodeID, "gpus", t.GPUs)
		if err := o.cfg.Executor.Start(ctx, t); err != nil {
			o.log.Warn("job failed to start", "job_id", t.JobID, "err", err)
			o.applyUpdates(ctx, []exec.Update{{JobID: t.JobID, Attempt: t.Attempt, Kind: exec.Exited, At: o.cfg.Now(), ExitCode: -1, Err: err}})
		}
	}
	o.runAfter(ctx, tx)
}

// preempt marks a victim and, once that is durable, warns it (the notice
// file, then SIGTERM) and kills it after its grace period. Write lock held.
func (o *Orchestrator) preempt(ctx context.Context, tx *txn, p sched.Preemption) {
	j := o.jobs.Get(p.JobID)
	if j == nil || !j.State.Active() || j.Preempting {
		return
	}
	j.Preempting, j.PreemptMessage = true, p.Message
	tx.touch(j)
	grace := o.policy.PreemptGrace.Duration()
	if j.PreemptGrace != nil {
		grace = j.PreemptGrace.Duration()
	}
	id, attempt := j.ID, j.RetryCount
	notice := fmt.Sprintf("preempted at %s: %s; SIGKILL in %s\n", tx.now.Format(time.RFC3339), p.Message, grace)
	o.log.Info("job preempted", "job_id", id, "for", p.ForJob, "reason", p.Reason, "grace", grace)
	tx.after = append(tx.after, func() {
		ctx := context.WithoutCancel(ctx)
		if n, ok := o.cfg.Executor.(exec.Noticer); ok {
			if err := n.Notice(ctx, id, attempt, notice); err != nil {
				o.log.Warn("preemption notice not written", "job_id", id, "err", err)
			}
		}
		if err := o.cfg.Executor.Stop(ctx, id, attempt, grace); err != nil {
			o.log.Error("stop preempted job", "job_id", id, "err", err)
		}
	})
}

// task is the executor's task for a job's placements (exec.NewTask: one
// rank per node, rank 0 first), with its array task's and notebook's env.
func (o *Orchestrator) task(j *api.Job, ps []sched.Placement) exec.Task {
	ranks := make([]exec.Rank, len(ps))
	for i, p := range ps {
		ranks[i] = exec.Rank{NodeID: p.NodeID, GPUs: p.GPUs}
	}
	t := exec.NewTask(j, ranks, o.LogPath(j.ID, j.RetryCount), o.attemptPath(j.ID, j.RetryCount, ".preempt"))
	if j.ArrayJobID != "" {
		t.Env = o.arr.Env(j, t.Env)
	}
	if j.Notebook {
		t.Env = notebookEnv(j, t.Env)
	}
	return t
}

// applyUpdates applies executor reports in one transaction. Loop only.
func (o *Orchestrator) applyUpdates(ctx context.Context, us []exec.Update) {
	if len(us) == 0 {
		return
	}
	o.mu.Lock()
	tx := o.begin()
	o.applyUpdatesTx(tx, us)
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("executor updates not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// applyUpdatesTx applies executor reports in tx. Reports about an attempt
// that is no longer current (the job was requeued or ended) are dropped.
// Loop only, write lock held.
func (o *Orchestrator) applyUpdatesTx(tx *txn, us []exec.Update) {
	for _, u := range us {
		o.settleAfter(tx, u) // recover.go: the executor may drop the attempt once this commits
		j := o.jobs.Get(u.JobID)
		if j == nil || j.RetryCount != u.Attempt || !j.State.Active() {
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
			if j.TimeLimit != nil {
				o.limits.Arm(at.Add(j.TimeLimit.Duration()), o.cfg.Now()) // feature/limits: the alarm
			}
			if u.ImageDigest != "" {
				j.ImageDigest = u.ImageDigest
			}
			tx.transition(j, api.StateRunning, api.ReasonStarted, j.Message)
			o.log.Info("job running", "job_id", j.ID, "pid", u.PID)
		case exec.Exited:
			o.endAttempt(tx, j, at)
			if u.TimedOut {
				j.TimedOut = true // the engine's own time limit (Slurm's TIMEOUT)
			}
			if u.Unstarted && o.requeueUnstarted(tx, j) { // recover.go
				continue
			}
			if u.Lost != "" && !j.CancelRequested && !j.TimedOut {
				o.lose(tx, j, u.Lost, u.Err)
				continue
			}
			if j.Preempting && !j.CancelRequested && !j.TimedOut && u.Err == nil {
				j.RetryCount++
				j.Preemptions++
				tx.transition(j, api.StateQueued, api.ReasonPreempted,
					fmt.Sprintf("%s; requeued as attempt %d (exit code %d)", j.PreemptMessage, j.RetryCount, u.ExitCode))
				j.ResetAttempt()
				o.log.Info("preempted job requeued", "job_id", j.ID, "attempt", j.RetryCount)
				continue
			}
			to, reason, msg := exitOutcome(j, u.ExitCode, u.Signal, u.Err, u.OOMKilled)
			j.FinishedAt = &at
			if u.Err == nil {
				code := u.ExitCode
				j.ExitCode = &code
			}
			if to == api.StateCompleted && j.StartedAt != nil {
				o.estimator.Observe(j.User, at.Sub(*j.StartedAt))
			}
			tx.transition(j, to, reason, msg)
			o.log.Info("job ended", "job_id", j.ID, "state", string(to), "exit_code", u.ExitCode)
		}
	}
}

// backoffBase is the default wait before a lost job's next attempt
// (Config.RetryBackoff), doubling per retry (jobbook.LostAttempt).
const backoffBase = 10 * time.Second

// lose settles a job whose attempt's processes are gone (its node was
// lost, or its agent came back without it): requeued after a backoff
// while retries remain, else failed, with the reason ("lost",
// "node_lost"; jobbook.LostAttempt, applied by txn.settle). Write lock held.
func (o *Orchestrator) lose(tx *txn, j *api.Job, reason string, cause error) {
	why := "its processes are gone"
	if cause != nil {
		why = cause.Error()
	}
	id, attempt := j.ID, j.RetryCount
	tx.after = append(tx.after, func() {
		// Whatever is left of the attempt (other ranks, a node that comes
		// back with the process still running) is stopped: the books say
		// its GPUs are free.
		o.cfg.Executor.Stop(context.Background(), id, attempt, 0)
	})
	s := jobbook.LostAttempt(j, why, reason, o.cfg.RetryBackoff, tx.now)
	tx.settle(j, s) // recover.go
	if s.Ended {
		o.log.Warn("job lost", "job_id", j.ID, "reason", reason)
		return
	}
	o.log.Warn("job requeued after a loss", "job_id", j.ID, "reason", reason, "not_before", j.NotBefore)
}

// endAttempt charges the attempt's GPU time to the job and to its user's
// and project's fair-share usage. Write lock held.
func (o *Orchestrator) endAttempt(tx *txn, j *api.Job, at time.Time) {
	if j.StartedAt == nil || !at.After(*j.StartedAt) {
		return
	}
	gs := gpushare.Equivalents(j.Allocation) * at.Sub(*j.StartedAt).Seconds() // a slice or share: its part
	j.GPUSeconds += gs
	o.ledger.Add(j.User, j.Project, gs, at)
	o.spend.ChargeAttempt(tx, j, at) // feature/spend: the ledger's rows, in the same transaction
}

// schedJob is a queued job as the core sees it: the job's own part
// (jobbook.SchedJob), its run-time estimate and its booking.
func schedJob(j *api.Job, est func(*api.Job) runtimes.Estimate) sched.Job {
	sj := jobbook.SchedJob(j)
	est(j).Apply(&sj)
	bookings.View(&sj, j) // feature/bookings
	return sj
}
