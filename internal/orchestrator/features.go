package orchestrator

import (
	"context"

	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/cpujobs"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/jobio"
	"github.com/corral-sched/corral/internal/feature/notes"
	"github.com/corral-sched/corral/internal/feature/reclaim"
)

// features are Corral's features in the one order the loop calls them,
// at each moment each of them serves (package feature names the
// moments). A new feature is a package whose type implements the moments
// it needs, and one line here.
//
// The order is behaviour where two features serve one moment: at submit
// the first refusal is the answer; each ticker commits its own batch;
// the snapshot's holds must be in it before bookings give running work
// its grace. The golden day test (golden_test.go) records it.
//
// The GPU books (o.gpus, package gpubook: whole GPUs' owners, and GPU
// sharing's slices and shares) serve no moment: they are a shared book,
// which the loop changes where it allocates, releases and recovers and
// reads where it snapshots, so that a hold's snapshot sees the slices
// and shares too.
func (o *Orchestrator) features() []any {
	return []any{
		o.refs,          // short numbers: the last one given, at recovery (feature/refs)
		jobio.Check{},   // scripts, output paths and images checked at submit
		o.deps,          // depends_on checked at submit, held jobs kept out of the cycle (package deps)
		o.sizes,         // a job's command and env, and each user's live jobs, bounded in bytes
		o.queueLimits(), // what one user and the cluster may queue, interactive work's limits (feature/limits)
		o.holds,         // GPUs held outside the queue: their share of the snapshot
		// holds past their expiry release their GPUs (holds.go: the loop frees them)
		holds.Expiry{Books: o.holds, Release: holdCluster{o.gpus, o}, Now: o.cfg.Now, Log: o.log},
		o.bookings, // bookings: who may submit to one, blocked intervals, moved along their windows each tick, their books at recovery (feature/bookings)
		cpujobs.Cap{MaxPerUser: o.cfg.MaxRunningCPUJobsPerUser}, // the cap on each user's running jobs without GPUs
		o.reclaim, // what idle reclaim kept of an ended job's connections
		// interactive jobs idle too long are warned, then reclaimed (feature/reclaim)
		reclaim.Tick{Books: o.reclaim, Cluster: reclaimCluster{o.gpus.Nodes(), o}, Notes: o.notes, Now: o.cfg.Now, Log: o.log},
		o.timeLimits(), // running attempts past their time limit are stopped (feature/limits, reclaim.go)
		o.notes,        // the outbox rows of each batch, warnings and alerts (feature/notes)
		// the queue wait's alert; what was noted, committed when nothing else commits
		notes.Flush{Notes: o.notes, Now: o.cfg.Now},
		endedJobs{o}, // ended jobs summarised (feature/ended), then out of memory (finished.go)
		usageTick{o}, // the heartbeat, and budgets' look at running attempts (usage.go)
		o.arr,        // job arrays: their limits at submit, their books, done arrays out of memory (feature/arrays)
		o.spend,      // GPU time charged; exhausted budgets at submit and in the queue (feature/spend)
		o.runtimes,   // learned run times: a run row as an attempt ends, the history back at recovery (feature/runtimes)
	}
}

// The registrations below are the loop's side of a feature: they reach
// into the shared books through o.

type endedJobs struct{ o *Orchestrator }

func (f endedJobs) BeforeCommit(tx feature.Tx) { f.o.noteEnded(ownTxn(tx)) }
func (f endedJobs) Committed(tx feature.Tx)    { f.o.evictFinished(ownTxn(tx)) }

// usageTick is the part of usage that stays with the loop: budgets'
// look at the running attempts and the heartbeat each commit, and only
// the loop makes a transaction.
type usageTick struct{ o *Orchestrator }

func (f usageTick) Tick(ctx context.Context) { f.o.heartbeat(ctx) }
