package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/refs"
	"github.com/corral-sched/corral/internal/feature/spend"
)

// FeatureOps are the API's operations that the features own, each over
// its feature's books and the loop (feature.Loop): the server takes them
// once at assembly and calls them directly, so the orchestrator keeps no
// delegate of them. Every value is safe to use from any goroutine: a
// change runs as one op of the loop, a read under its read lock.
type FeatureOps struct {
	// Spend: the usage ledger, budgets and prices (GET /usage, /budgets,
	// /prices and their changes).
	Spend spend.Ops
	// Bookings: GPUs booked ahead (/reservations).
	Bookings bookings.Ops
	// Deps: a queued job's depends_on changed (PATCH .../dependency).
	Deps deps.Ops
	// Arrays: an array's view, its throttle and its cancel (/arrays).
	Arrays arrays.Ops
	// Refs: what a person may type for a job resolved to its id (a
	// number, NUMBER_INDEX, an id or a unique prefix of MinIDPrefix
	// characters, a name), and the caller's unfinished jobs for shell
	// completion. No lock is held across the store's reads.
	Refs *refs.Resolver
	// Holds: GPUs held outside the queue (POST /cluster/gpu-allocate,
	// gpu-release).
	Holds holds.Ops
	// History: the cluster over time (the dashboard's graphs), the job
	// counters and cycle durations of /metrics.
	History history.Ops
}

// FeatureOps returns the features' API operations over o.
func (o *Orchestrator) FeatureOps() FeatureOps {
	return FeatureOps{
		Spend:    spend.Ops{Books: o.spend, Loop: loop{o}, Store: o.cfg.Store},
		Bookings: bookings.Ops{Books: o.bookings, Loop: loop{o}},
		Deps:     deps.Ops{Tracker: o.deps, Loop: loop{o}, View: func(j *api.Job) api.Job { return o.view(j, true) }},
		Arrays:   arrays.Ops{Books: o.arr, Loop: loop{o}, Refs: o.refs, Store: o.arrayStore(), Grace: o.cfg.CancelGrace, Log: o.log},
		Refs:     o.refs,
		Holds:    o.holdOps(), // holds.go
		History:  history.Ops{Books: &o.hist, Loop: loop{o}, Live: o.jobs.All, Now: o.cfg.Now},
	}
}
