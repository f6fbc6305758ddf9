package store

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// Backend is what the orchestrator needs of a store: the Log its batches
// are committed to and its state loaded from, and the reads of what its
// memory no longer holds (ended jobs and done arrays, idempotency keys,
// numbers and names), the usage ledger's rows, pruning, and the
// history's samples. *Store is one, on SQLite or PostgreSQL;
// memstore.Store is one in memory, for tests; storetest.RunLog holds
// them all to one contract.
type Backend interface {
	Log

	Job(ctx context.Context, id string) (api.Job, error)
	JobsPage(ctx context.Context, q JobQuery) ([]api.Job, bool, error)
	FirstEnded(ctx context.Context, id string, states ...api.State) (api.Job, error)
	EndedSummary(ctx context.Context) ([]UsageRow, error)
	Array(ctx context.Context, id string) (ArrayRecord, error)
	IdempotentJob(ctx context.Context, key string) (string, bool, error)
	NumberID(ctx context.Context, n int64) (string, bool, error)
	NamedJobs(ctx context.Context, user, name string, limit int) ([]Named, error)
	JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	ArrayIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
	DependencyIDs(ctx context.Context, prefix string, limit int) ([]string, error)

	UsageRecords(ctx context.Context, since, until time.Time) ([]usage.Record, error)
	UsageTotals(ctx context.Context) ([]UsageTotal, error)

	PruneFinished(ctx context.Context, before time.Time, limit int, keep []string) ([]PrunedJob, error)
	PruneDoneArrays(ctx context.Context, before time.Time, limit int, keep []string) ([]PrunedJob, []string, error)
	PruneRuns(ctx context.Context, before time.Time, keep, limit int) (int, error)

	// PutHistory stores a sample taken at at and drops those taken
	// before dropBefore; History returns the samples taken since since,
	// oldest first.
	PutHistory(ctx context.Context, at time.Time, data []byte, dropBefore time.Time) error
	History(ctx context.Context, since time.Time) ([]HistoryRow, error)
}

var _ Backend = (*Store)(nil)
