package orchestrator

import (
	"context"
	"fmt"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// Settings keys in the store.
const (
	settingPolicy     = "policy"
	settingScheduling = "scheduling" // "on" or "off"
)

// recover loads the store into memory and settles jobs that were active
// when the last server died: their processes died with it (or are killed
// now), so each is requeued while retries remain, else failed with reason
// "lost". Holds survive: they are for work outside Corral.
func (o *Orchestrator) recover(ctx context.Context) error {
	st, err := o.cfg.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if p := st.Settings[settingPolicy]; p != "" && validPolicy(p) {
		o.policy.Policy = p
	}
	o.running = st.Settings[settingScheduling] != "off"
	o.idem = st.Idempotency

	lost := map[string]bool{}
	for i := range st.Jobs {
		j := &st.Jobs[i]
		if j.Allocation == nil {
			j.Allocation = []api.Allocation{}
		}
		o.jobs[j.ID] = j
		o.order = append(o.order, j.ID)
		switch {
		case j.State == api.StateQueued:
			o.queued[j.ID] = true
		case j.State.Active():
			lost[j.ID] = true
		}
	}
	for i := range st.Holds {
		h := &st.Holds[i]
		o.holds[h.JobID] = h
		for _, a := range h.Allocation {
			o.owner[gpuKey{a.NodeID, a.GPUID}] = h.JobID
		}
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
	for _, id := range o.order {
		if !lost[id] {
			continue
		}
		j := o.jobs[id]
		switch {
		case j.CancelRequested:
			j.FinishedAt = &tx.now
			tx.transition(j, api.StateCanceled, api.ReasonCanceled, "the server stopped while the job was being canceled")
		case j.RetryCount < j.MaxRetries:
			j.RetryCount++
			j.StartedAt, j.ExitCode = nil, nil
			tx.transition(j, api.StateQueued, api.ReasonLost,
				fmt.Sprintf("the server stopped while the job was %s; requeued (retry %d of %d)", j.State, j.RetryCount, j.MaxRetries))
			j.Allocation = []api.Allocation{}
		default:
			j.FinishedAt = &tx.now
			tx.transition(j, api.StateFailed, api.ReasonLost,
				fmt.Sprintf("the server stopped while the job was %s; no retries left (max_retries %d)", j.State, j.MaxRetries))
		}
		o.log.Warn("job lost with the previous server", "job_id", id, "now", string(j.State))
	}
	if err := o.commit(ctx, tx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return nil
}

func validPolicy(p string) bool {
	for _, v := range sched.Policies() {
		if v == p {
			return true
		}
	}
	return false
}
