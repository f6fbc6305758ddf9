package orchestrator

import "github.com/corral-sched/corral/internal/store/memstore"

// The in-memory store is one the orchestrator takes: tests of the loop
// and of features run over it without a database.
var _ Store = (*memstore.Store)(nil)
