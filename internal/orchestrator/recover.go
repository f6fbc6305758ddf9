package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/policy"
	"github.com/corral-sched/corral/internal/sched"
)

// settingScheduling is the store key of the scheduling switch: "on" or "off".
const settingScheduling = "scheduling"

// recover loads the store into memory and settles jobs that were active
// when the last server stopped. With an Adopter executor, those placed on
// nodes (the in-process agent of `corral up` included: its jobs outlive
// the server) are adopted: their agents report them running or ended,
// with their real exit codes. The others are lost: their processes are
// killed (Reap), and each is requeued while retries remain, else failed
// with reason "lost". Holds survive: they are for work outside Corral.
func (o *Orchestrator) recover(ctx context.Context) error {
	st, err := o.cfg.Log.Load(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	o.policy = policy.Load(st.Settings)
	o.reclaim.Defaults(&o.policy)
	if err := o.holds.LoadUsage(st.Settings); err != nil {
		o.log.Warn("holds' past usage is forgotten", "err", err)
	}
	if err := o.spend.Load(ctx, st.Settings, o.cfg.Store); err != nil { // feature/spend
		return fmt.Errorf("recover: %w", err)
	}
	if err := o.reclaim.Check(o.policy); err != nil {
		return fmt.Errorf("recover: the stored policies: %w", err)
	}
	// The stored nodes (nodebook.Book.Load): one that was up has a TTL
	// from now to report again; one that was down stays down until its
	// agent registers (liveness.go).
	if err := o.gpus.Nodes().Load(st.Nodes, o.cfg.Now()); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	defer o.reviveBusyDownNodes() // liveness.go: once the jobs are loaded
	defer o.rebuildLedger(o.policy.HalfLife.Duration())
	o.running = st.Settings[settingScheduling] != "off"
	o.jobs.LoadKeys(st.Idempotency)
	arrays.AddTasks(st) // tasks with no row yet

	lost := map[string]bool{}
	adopter, canAdopt := o.cfg.Executor.(exec.Adopter)
	var adopt []*api.Job
	only := o.gpus.Nodes().Only() // where a job of no GPUs stored without its node runs, when that is certain
	for i := range st.Jobs {
		j := &st.Jobs[i]
		if j.Allocation == nil {
			j.Allocation = []api.Allocation{}
		}
		o.jobs.Add(j)
		switch {
		case j.State == api.StateQueued:
			o.jobs.SetQueued(j, true)
		case j.State.Active() && canAdopt && (len(j.Allocation) > 0 || j.GPUCount == 0 && (j.NodeID != "" || only != "")):
			// Its agent may still run it: adopt it; the agent says otherwise.
			adopt = append(adopt, j)
			o.jobs.SetActive(j.ID, true)
			o.gpus.Own(j.ID, j.User, j.Allocation) // its GPUs, slices and shares (package gpubook)
		case j.State.Active():
			lost[j.ID] = true
		}
	}
	o.on.loadAll(st) // features.go: bookings, arrays
	for i := range st.Holds {
		h := &st.Holds[i]
		o.holds.Add(h)
		o.gpus.Own(h.JobID, h.User, h.Allocation)
	}
	for _, j := range adopt {
		id, attempt := j.ID, j.RetryCount
		ps := sched.PlacementsOf(j.Allocation)
		if len(ps) == 0 { // a job of no GPUs: on the node it was placed on
			node := j.NodeID
			if node == "" {
				node = only // stored by a server that did not record it
			}
			ps = []sched.Placement{{NodeID: node, GPUs: []int{}}}
		}
		t := o.task(j, ps)
		t.Placed = j.LastEntered(api.StateScheduled) // its start may have come before this restart
		if err := adopter.Adopt(ctx, t); err != nil {
			return fmt.Errorf("recover: adopt job %s: %w", id, err)
		}
		switch {
		case j.CancelRequested, j.TimedOut:
			o.cfg.Executor.Stop(ctx, id, attempt, o.cfg.CancelGrace)
		case j.Preempting:
			o.cfg.Executor.Stop(ctx, id, attempt, o.policy.PreemptGrace.Duration())
		}
	}
	if len(adopt) > 0 {
		o.log.Info("jobs adopted from the previous server; their agents confirm them", "jobs", len(adopt))
	}
	if len(lost) == 0 {
		return nil
	}

	if o.cfg.Reap != nil {
		n, err := o.cfg.Reap(lost)
		if err != nil {
			o.log.Warn("could not look for leftover job processes", "err", err)
		}
		if n > 0 {
			o.log.Warn("killed processes left by the previous server", "processes", n)
		}
	}
	tx := o.begin()
	for j := range o.jobs.All() {
		if !lost[j.ID] {
			continue
		}
		o.chargeLostAttempt(tx, j) // usage.go: up to the last heartbeat
		switch {
		case j.TimedOut:
			j.FinishedAt = &tx.now
			tx.transition(j, api.StateFailed, api.ReasonTimeLimit, "ran past its time limit; the server stopped while it was being stopped")
		case j.CancelRequested:
			j.FinishedAt = &tx.now
			tx.transition(j, api.StateCanceled, api.ReasonCanceled, "the server stopped while the job was being canceled")
		case j.RetryCount-j.Preemptions < j.MaxRetries:
			j.RetryCount++
			tx.transition(j, api.StateQueued, api.ReasonLost,
				fmt.Sprintf("the server stopped while the job was %s; requeued (retry %d of %d)", j.State, j.RetryCount-j.Preemptions, j.MaxRetries))
			j.ResetAttempt()
		default:
			j.FinishedAt = &tx.now
			tx.transition(j, api.StateFailed, api.ReasonLost,
				fmt.Sprintf("the server stopped while the job was %s; no retries left (max_retries %d)", j.State, j.MaxRetries))
		}
		o.log.Warn("job lost with the previous server", "job_id", j.ID, "now", string(j.State))
	}
	if err := o.commit(ctx, tx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return nil
}

// settleAfter tells the executor, once tx is committed, that an attempt's
// reported end is durable (exec.Settler), whether tx applies the report
// or drops it as stale: until then the attempt's agent keeps its record,
// so that a server killed before the commit hears the end again, with
// its real exit code, from the agent that adopts the record. Write lock
// held.
func (o *Orchestrator) settleAfter(tx *txn, u exec.Update) {
	s, ok := o.cfg.Executor.(exec.Settler)
	if !ok || u.Kind != exec.Exited {
		return
	}
	id, attempt := u.JobID, u.Attempt
	tx.after = append(tx.after, func() { s.Settled(id, attempt) })
}

// requeueUnstarted settles an attempt that no agent ever ran (every node
// it was placed on came back without it: exec.Update.Unstarted) for a job
// not yet known to run: adopted after a restart while scheduled or
// allocating, or placed just before its agent restarted. It goes back to
// the queue without counting a retry, and keeps its attempt number: no
// process of that attempt exists, nor a record of it on any node. It
// reports false (nothing done) for a job that ran, or that is being
// canceled or stopped at its time limit: those end as a lost attempt
// does. Write lock held.
func (o *Orchestrator) requeueUnstarted(tx *txn, j *api.Job) bool {
	if j.State == api.StateRunning || j.CancelRequested || j.TimedOut {
		return false
	}
	from := j.State
	tx.transition(j, api.StateQueued, api.ReasonRequeued,
		fmt.Sprintf("its node came back without it while it was %s (it never started); requeued without counting a retry", from))
	j.ResetAttempt()
	o.log.Warn("job requeued: it never started", "job_id", j.ID, "was", string(from))
	return true
}

// rebuildLedger recomputes decayed usage from every job's recorded GPU time
// (each counted at the job's latest event) and learned run times from
// completed jobs. Write lock held, or before the loop runs.
func (o *Orchestrator) rebuildLedger(halfLife time.Duration) {
	o.ledger = sched.NewLedger(halfLife)
	o.estimator = sched.NewEstimator()
	for j := range o.jobs.All() { // ended ones are counted by rebuildFinished
		if j.GPUSeconds > 0 && len(j.Events) > 0 {
			o.ledger.Add(j.User, j.Project, j.GPUSeconds, j.Events[len(j.Events)-1].At)
		}
		if j.State == api.StateCompleted && j.StartedAt != nil && j.FinishedAt != nil {
			o.estimator.Observe(j.User, j.FinishedAt.Sub(*j.StartedAt))
		}
	}
	// Ended jobs are in the store only (finished.go).
	if err := o.rebuildFinished(context.Background()); err != nil {
		o.log.Error("rebuild the fair-share ledger from the store's ended jobs", "err", err)
	}
	for user, u := range o.holds.Usage() { // each user's at its time: the ledger decays it from there
		o.ledger.Add(user, holds.Project, u.GPUSeconds, u.At)
	}
}
