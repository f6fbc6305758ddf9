package orchestrator

import (
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/store"
)

// Store is what the orchestrator needs of its store (store.Backend): the
// Log its batches are committed to and its state loaded from, and the
// reads of what memory no longer holds. *store.Store is one, on SQLite or
// PostgreSQL; memstore.Store one in memory; a test may wrap either.
type Store = store.Backend

// The history feature reads and writes its samples through the same store.
var _ history.Store = Store(nil)
