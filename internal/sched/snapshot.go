package sched

import "time"

// The rules below turn a caller's books into a Snapshot. The live
// orchestrator and the trace simulator (internal/sim) both build their
// snapshots with them, so the two feed the core the same estimates and the
// same usage for the same history.

// EstimateFor is the run time the core is told for a job: the estimate its
// user gave (given true), else the mean of its user's past run times (see
// Estimator), else def, the policy's default estimate. e may be nil.
func EstimateFor(given time.Duration, user string, e *Estimator, def time.Duration) (time.Duration, bool) {
	if given > 0 {
		return given, true
	}
	if e != nil {
		if d, ok := e.Estimate(user); ok && d > 0 {
			return d, false
		}
	}
	return def, false
}

// ChargeRunning adds to u the GPU time that running attempts have used so
// far (GPU-equivalents held x time since StartedAt, up to now: a slice or
// share counts its part of its GPU, see Equivalents), so that fair share
// counts work in progress as well as work finished. Finished attempts are
// charged to a Ledger when they end; u's maps must be non-nil.
func ChargeRunning(u Usage, running []Running, now time.Time) {
	for i := range running {
		r := &running[i]
		if !now.After(r.StartedAt) {
			continue
		}
		gs := Equivalents(r.Placements) * now.Sub(r.StartedAt).Seconds()
		u.Users[r.User] += gs
		u.Projects[r.Project] += gs
	}
}

// StaticOrder reports whether the policy walks the queue in a fixed order
// (fcfs, sjf, priority): one that depends on each job alone, not on usage
// or on what the cycle places. Under fair_share the order of one user's
// jobs within a project is fixed in the same way, and users take turns.
func StaticOrder(p Policy) bool {
	return p.WithDefaults().Name != PolicyFairShare
}

// CompareQueued is the order in which a cycle considers queued jobs under a
// static policy (see StaticOrder), and the order of one user's jobs within
// a project under fair_share: negative when a comes first. It is the
// order Schedule sorts by: the policy's key (aged priority, estimate or
// submission), then submission time, then id.
func CompareQueued(a, b *Job, p Policy) int {
	p = p.WithDefaults()
	return compareKeyed(keyOf(a, &p), keyOf(b, &p))
}
