package store

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The store's contract, in the manner of hashicorp/raft's LogStore: a
// small interface of what its users need, met by *Store on either
// database (SQLite, the embedded default, Open; PostgreSQL, OpenPostgres)
// and checked by one conformance suite (internal/store/storetest) run
// against both.

// Log is what the orchestrator, the one writer, needs: commit a batch of
// changes and read the state back at start-up.
type Log interface {
	// Commit writes b, all or nothing, and returns once it is durable:
	// a batch Commit returned nil for survives kill -9 of the process
	// (and, on SQLite, power loss; on PostgreSQL, whatever the server's
	// synchronous_commit promises). An error means nothing of b was
	// written. Concurrent commits may share one transaction (group.go).
	Commit(ctx context.Context, b *Batch) error
	// Load reads the whole state, as committed.
	Load(ctx context.Context) (*State, error)
}

// Reader is what the server reads from the store beside the
// orchestrator's state: the audit trail, the notification outbox and
// endpoints, the dashboard's history, the tokens.
type Reader interface {
	Audit(ctx context.Context, f AuditFilter) ([]api.AuditEntry, error)
	Outbox(ctx context.Context, f OutboxFilter) ([]OutboxItem, error)
	History(ctx context.Context, since time.Time) ([]HistoryRow, error)
	Tokens(ctx context.Context) ([]TokenRecord, error)
	Endpoints(ctx context.Context) ([]EndpointRecord, error)
	NotifyDefaults(ctx context.Context) ([]NotifyDefaultRecord, error)
}

// Interface is a whole store: Log, Reader, and Close.
type Interface interface {
	Log
	Reader
	// Close closes the store; writes waiting to be committed fail with
	// ErrClosed.
	Close() error
}

var _ Interface = (*Store)(nil)
