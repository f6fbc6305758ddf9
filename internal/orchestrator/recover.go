package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/policy"
	"github.com/corral-sched/corral/internal/sched"
)

// settingScheduling is the store key of the scheduling switch: "on" or "off".
const settingScheduling = "scheduling"

// recover loads the store into memory and settles jobs that were active
// when the last server stopped (what each becomes is jobbook.Recovered's
// rule). With an Adopter executor, those placed on nodes (the in-process
// agent of `corral up` included: its jobs outlive the server) are
// adopted: their agents report them running or ended, with their real
// exit codes. The others are lost: their processes are killed (Reap),
// and each becomes what jobbook.LostWithServer says. Holds survive: they
// are for work outside Corral. The order of its steps is the recovery's.
func (o *Orchestrator) recover(ctx context.Context) error {
	// 1. The settings: the policy and the features' stored state.
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
	// 2. The stored nodes (nodebook.Book.Load): one that was up has a TTL
	// from now to report again; one that was down stays down until its
	// agent registers (liveness.go).
	if err := o.gpus.Nodes().Load(st.Nodes, o.cfg.Now()); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	// 7. Last, however recovery ends: the fair-share ledger rebuilt from
	// every job; a node stored down that holds adopted jobs is up, with a
	// fresh TTL, for its agent to confirm them (nodebook.Book.Revive).
	halfLife := o.policy.HalfLife.Duration()
	defer func() {
		o.rebuildLedger(halfLife)
		for _, n := range o.gpus.Nodes().Revive(slices.Collect(o.jobs.Active()), o.cfg.Now()) {
			o.log.Warn("node was stored down but holds jobs: up for a TTL for its agent to confirm them", "node", n.ID)
		}
	}()
	o.running = st.Settings[settingScheduling] != "off"
	o.jobs.LoadKeys(st.Idempotency)
	arrays.AddTasks(st) // tasks with no row yet

	// 3. The jobs, each as its fate says; an adopted job keeps its GPUs.
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
		switch jobbook.Recovered(j, canAdopt, only) {
		case jobbook.Queue:
			o.jobs.SetQueued(j, true)
		case jobbook.Adopt:
			adopt = append(adopt, j)
			o.jobs.SetActive(j.ID, true)
			o.gpus.Own(j.ID, j.User, j.Allocation) // its GPUs, slices and shares (package gpubook)
		case jobbook.Lost:
			lost[j.ID] = true
		}
	}
	// 4. The features' loaders (features.go: bookings, arrays), then the
	// holds with their GPUs.
	o.on.loadAll(st)
	for i := range st.Holds {
		h := &st.Holds[i]
		o.holds.Add(h)
		o.gpus.Own(h.JobID, h.User, h.Allocation)
	}
	// 5. Adoption; a job being stopped is stopped again.
	for _, j := range adopt {
		t := o.task(j, jobbook.Placements(j, only))
		t.Placed = j.LastEntered(api.StateScheduled) // its start may have come before this restart
		if err := adopter.Adopt(ctx, t); err != nil {
			return fmt.Errorf("recover: adopt job %s: %w", j.ID, err)
		}
		switch {
		case j.CancelRequested, j.TimedOut:
			o.cfg.Executor.Stop(ctx, j.ID, j.RetryCount, o.cfg.CancelGrace)
		case j.Preempting:
			o.cfg.Executor.Stop(ctx, j.ID, j.RetryCount, o.policy.PreemptGrace.Duration())
		}
	}
	if len(adopt) > 0 {
		o.log.Info("jobs adopted from the previous server; their agents confirm them", "jobs", len(adopt))
	}
	if len(lost) == 0 {
		return nil
	}
	// 6. The lost jobs: their leftover processes killed, each settled and
	// charged up to its last heartbeat, in one commit.
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
		if lost[j.ID] {
			o.spend.ChargeLost(tx, j) // feature/spend: up to its last heartbeat; rebuildLedger counts it
			tx.settle(j, jobbook.LostWithServer(j))
			o.log.Warn("job lost with the previous server", "job_id", j.ID, "now", string(j.State))
		}
	}
	if err := o.commit(ctx, tx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return nil
}

// settle makes the transition s says of j (package jobbook's rules for
// an attempt that ends without a report of its own).
func (tx *txn) settle(j *api.Job, s jobbook.Settle) {
	if s.Ended {
		now := tx.now
		j.FinishedAt = &now
	}
	if s.Retry {
		j.RetryCount++
	}
	if !s.NotBefore.IsZero() {
		notBefore := s.NotBefore
		j.NotBefore = &notBefore
	}
	tx.transition(j, s.State, s.Reason, s.Detail)
	if s.Reset {
		j.ResetAttempt()
	}
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

// requeueUnstarted settles an attempt that no agent ever ran, when
// jobbook.Unstarted says it goes back to the queue, and reports whether
// it did. Write lock held.
func (o *Orchestrator) requeueUnstarted(tx *txn, j *api.Job) bool {
	s, ok := jobbook.Unstarted(j)
	if !ok {
		return false
	}
	from := j.State
	tx.settle(j, s)
	o.log.Warn("job requeued: it never started", "job_id", j.ID, "was", string(from))
	return true
}

// rebuildLedger recomputes decayed usage and learned run times from
// every job in memory (jobbook.Learn), the store's ended jobs
// (rebuildFinished) and the holds' usage. Write lock held, or before the
// loop runs.
func (o *Orchestrator) rebuildLedger(halfLife time.Duration) {
	o.ledger = sched.NewLedger(halfLife)
	o.estimator = sched.NewEstimator()
	jobbook.Learn(o.jobs.All(), o.ledger, o.estimator)
	if err := o.rebuildFinished(context.Background()); err != nil { // finished.go
		o.log.Error("rebuild the fair-share ledger from the store's ended jobs", "err", err)
	}
	for user, u := range o.holds.Usage() { // each user's at its time: the ledger decays it from there
		o.ledger.Add(user, holds.Project, u.GPUSeconds, u.At)
	}
}
