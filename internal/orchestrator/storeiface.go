package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// Store is what the orchestrator needs of its store: the Log its batches
// are committed to and its state loaded from, and the reads of what
// memory no longer holds (ended jobs and done arrays, idempotency keys,
// numbers and names), the usage ledger's rows, pruning, and the
// history's samples. *store.Store is one, on SQLite or PostgreSQL; a
// test may wrap it.
type Store interface {
	store.Log
	history.Store

	Job(ctx context.Context, id string) (api.Job, error)
	JobsPage(ctx context.Context, q store.JobQuery) ([]api.Job, bool, error)
	FirstEnded(ctx context.Context, id string, states ...api.State) (api.Job, error)
	EndedSummary(ctx context.Context) ([]store.UsageRow, error)
	Array(ctx context.Context, id string) (store.ArrayRecord, error)
	IdempotentJob(ctx context.Context, key string) (string, bool, error)
	NumberID(ctx context.Context, n int64) (string, bool, error)
	NamedJobs(ctx context.Context, user, name string, limit int) ([]store.Named, error)
	JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	ArrayIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	DependencyIDs(ctx context.Context, prefix string, limit int) ([]string, error)

	UsageRecords(ctx context.Context, since, until time.Time) ([]usage.Record, error)
	UsageTotals(ctx context.Context) ([]store.UsageTotal, error)

	PruneFinished(ctx context.Context, before time.Time, limit int, keep []string) ([]store.PrunedJob, error)
	PruneDoneArrays(ctx context.Context, before time.Time, limit int, keep []string) ([]store.PrunedJob, []string, error)
}

var _ Store = (*store.Store)(nil)
