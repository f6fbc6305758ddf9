package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/history"
)

// The cluster over time is the feature of package history (o.hist), and
// its reads the API's (FeatureOps.History); the orchestrator samples it
// every history.Interval with what it reads of its own books, and tells
// it of jobs that leave memory (finished.go) and of each cycle's
// duration (cycle.go).

// recordHistory samples the cluster now and then every history.Interval
// until ctx ends. Run starts it.
func (o *Orchestrator) recordHistory(ctx context.Context) {
	t := time.NewTicker(history.Interval)
	defer t.Stop()
	for {
		o.SampleHistory(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleHistory adds one sample of the cluster to the history now. The
// loop calls it every history.Interval; tests call it directly.
func (o *Orchestrator) SampleHistory(ctx context.Context) {
	cs := o.Cluster(ctx)
	o.mu.RLock()
	now := o.cfg.Now().UTC()
	queued, running := o.jobs.Queued(), o.jobs.ActiveLen()
	iv := o.hist.Take(o.jobs.All(), now)
	o.mu.RUnlock()
	if err := o.hist.Add(ctx, o.cfg.Store, now, cs, queued, running, iv); err != nil && ctx.Err() == nil {
		o.log.Warn("history sample not stored", "err", err)
	}
}

// JobStateCounts counts the jobs in each state.
func (o *Orchestrator) JobStateCounts() map[api.State]int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[api.State]int, len(api.States))
	for j := range o.jobs.Unordered() {
		out[j.State]++
	}
	for s, n := range o.gone.ByState() { // finished.go: those that left memory
		out[s] += n
	}
	return out
}
