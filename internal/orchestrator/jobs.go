package orchestrator

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/feature/reclaim"
	"github.com/corral-sched/corral/internal/jobspec"
)

// Submit validates and queues a job; it returns once the job is durable.
// With a non-empty idempotency key, a retry returns the first job (and
// replayed=true) instead of queueing a second one.
func (o *Orchestrator) Submit(ctx context.Context, req api.SubmitRequest, idemKey string) (job api.Job, replayed bool, err error) {
	return o.SubmitWith(ctx, req, SubmitOptions{IdempotencyKey: idemKey})
}

// SubmitOptions are the caller's side of a submission.
type SubmitOptions struct {
	IdempotencyKey string
	// Exempt skips the per-user limits (Limits.MaxQueuedPerUser): the
	// caller is an admin. The global and per-job limits still apply.
	Exempt bool
	// Audit, when set, is the submission's audit entry: it is written in
	// the same transaction as the job (or, when the submission is
	// refused, as the batch it was refused in), so the caller is answered
	// after one durable write, not two.
	Audit *SubmitAudit
}

// SubmitAudit carries a submission's audit entry to the orchestrator.
type SubmitAudit struct {
	// Entry returns the entry for the submission's outcome: target is the
	// job's id (empty when refused), err the refusal (nil: accepted). It
	// is called on the loop, with the write lock held: it must be quick
	// and must not call the orchestrator.
	Entry func(target string, err error) api.AuditEntry

	recorded atomic.Bool
}

// Recorded reports whether the entry is durable, committed with the
// submission's batch. When it is not (the submission never reached the
// loop, or the commit failed), the caller writes the entry itself.
func (a *SubmitAudit) Recorded() bool { return a != nil && a.recorded.Load() }

// SubmitWith is Submit with options; it enforces Config.Limits.
func (o *Orchestrator) SubmitWith(ctx context.Context, req api.SubmitRequest, opts SubmitOptions) (job api.Job, replayed bool, err error) {
	idemKey := opts.IdempotencyKey
	if len(idemKey) > 512 {
		return api.Job{}, false, api.BadRequest("invalid_header", "Idempotency-Key", "the Idempotency-Key header is longer than 256 characters")
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		v, err := o.submit(tx, &req, idemKey, opts.Exempt)
		if a := opts.Audit; a != nil && a.Entry != nil {
			target := ""
			if err == nil {
				target = v.job.ID
				if v.job.ArrayJobID != "" {
					target = v.job.ArrayJobID
				}
			}
			tx.batch.Audit = append(tx.batch.Audit, a.Entry(target, err))
			tx.durable = append(tx.durable, func() { a.recorded.Store(true) })
		}
		if err != nil {
			return nil, err
		}
		return v, nil
	})
	if err != nil {
		return api.Job{}, false, err
	}
	r := v.(submitResult)
	return r.job, r.replayed, nil
}

type submitResult struct {
	job      api.Job
	replayed bool
}

// submit queues a job in tx, or finds the one queued under idemKey.
// Write lock held.
func (o *Orchestrator) submit(tx *txn, req *api.SubmitRequest, idemKey string, exempt bool) (submitResult, error) {
	if idemKey != "" {
		if r, ok := o.replay(idemKey); ok { // finished.go: or from the store
			return r, nil
		}
	}
	if req.Array != "" {
		return o.submitArray(tx, req, idemKey, exempt) // arrays.go
	}
	j, err := jobspec.Parse(req, o.gpus.Capacity(o.cfg.Pools))
	if err != nil {
		return submitResult{}, err
	}
	// notebook.go: --notebook-mig
	o.notebookSlice(&j)
	if err := o.on.admit(&feature.Submission{Job: &j, Request: req, Tasks: 1, Exempt: exempt, Now: tx.now}); err != nil { // features.go
		return submitResult{}, err
	}
	j.ID = o.newID(tx.now)
	j.Number = tx.takeNumber(j.ID) // feature/refs
	j.SubmittedAt = tx.now
	jp := &j
	o.jobs.Add(jp)
	tx.transition(jp, api.StateQueued, api.ReasonSubmitted, "")
	tx.keepKey(idemKey, j.ID)
	// Debug: the API's request line (info) already names the new job, and
	// at thousands of submissions a second each line costs.
	o.log.Debug("job submitted", "job_id", j.ID, "user", j.User, "gpus", j.GPUCount, "priority", j.Priority.String())
	return submitResult{o.view(jp, true), false}, nil
}

// keepKey records, in memory and with tx's batch, that the submission
// under the idempotency key ("": none) made the job or array id. Write
// lock held.
func (tx *txn) keepKey(key, id string) {
	if key == "" {
		return
	}
	tx.o.jobs.SetKey(key, id)
	if tx.batch.Idempotency == nil {
		tx.batch.Idempotency = map[string]string{}
	}
	tx.batch.Idempotency[key] = id
}

// Cancel cancels a job. A queued job is canceled at once; a running one is
// sent SIGTERM, then SIGKILL after grace (0: the configured default), and
// becomes canceled when its processes are gone. started reports which: true
// when the job was running and is now being stopped.
func (o *Orchestrator) Cancel(ctx context.Context, id string, grace time.Duration) (job api.Job, stopping bool, err error) {
	if grace <= 0 {
		grace = o.cfg.CancelGrace
	}
	type result struct {
		job      api.Job
		stopping bool
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		j := o.jobs.Get(id)
		if j == nil {
			return nil, o.found().EndedError(id)
		}
		if err := jobspec.NotEnded(j); err != nil {
			return nil, err
		}
		if j.State == api.StateQueued {
			now := tx.now
			j.FinishedAt = &now
			tx.transition(j, api.StateCanceled, api.ReasonCanceled, "canceled while queued")
			o.log.Info("job canceled", "job_id", id)
			return result{o.view(j, true), false}, nil
		}
		j.CancelRequested = true
		tx.touch(j)
		attempt := j.RetryCount
		tx.after = append(tx.after, func() {
			if err := o.cfg.Executor.Stop(context.WithoutCancel(ctx), id, attempt, grace); err != nil {
				o.log.Error("stop job", "job_id", id, "err", err)
			}
		})
		o.log.Info("job cancel requested", "job_id", id, "grace", grace)
		return result{o.view(j, true), true}, nil
	})
	if err != nil {
		return api.Job{}, false, err
	}
	r := v.(result)
	return r.job, r.stopping, nil
}

// SetPriority changes the priority of a job that has not ended.
func (o *Orchestrator) SetPriority(ctx context.Context, id string, raw api.RawValue) (api.Job, error) {
	p, err := jobspec.Priority(raw)
	if err != nil {
		return api.Job{}, err
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		j := o.jobs.Get(id)
		if j == nil {
			return nil, o.found().EndedError(id)
		}
		if err := jobspec.NotEnded(j); err != nil {
			return nil, err
		}
		if j.Priority != p {
			j.Priority = p
			o.arr.Repriority(j)
			tx.touch(j)
			o.dirty = true
			o.log.Info("job priority changed", "job_id", id, "priority", p.String())
		}
		return o.view(j, true), nil
	})
	if err != nil {
		return api.Job{}, err
	}
	return v.(api.Job), nil
}

// exitOutcome turns an executor's Exited report into the job's final
// state: a feature's when it stopped the job (a booking's end, a time
// limit, idle reclaim), else jobspec.Exit's.
func exitOutcome(j *api.Job, code int, signal string, startErr error, oomKilled bool) (api.State, string, string) {
	switch {
	case j.TimedOut && j.ReservationEnded:
		return bookings.Outcome(j, code) // feature/bookings
	case j.TimedOut:
		return limits.Outcome(j, code) // feature/limits
	case j.IdleReclaimed:
		return reclaim.Outcome(code)
	}
	return jobspec.Exit(j, code, signal, startErr, oomKilled)
}
