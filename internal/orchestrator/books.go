package orchestrator

import (
	"sync/atomic"
)

// The shared books the Orchestrator struct holds, grouped by what they
// keep; the features keep theirs in their own packages (features.go).

// storeHealth is what the loop knows of its store's ability to write
// (storedown.go).
type storeHealth struct {
	down    atomic.Pointer[string]        // why the store cannot write, while it cannot
	sig     atomic.Pointer[chan struct{}] // closed when the store stops writing; replaced when it writes again
	looping bool                          // Run has begun: failed commits are retried (loop only)
}

// viewCache dates the views computed without the lock (queue_page.go).
type viewCache struct {
	// gen counts commits and cycles: the age of cached views; written
	// under the write lock, read without.
	gen atomic.Uint64
	// queued is len(queued) as of the last notify, read without the lock.
	queued atomic.Int64
	queue  queueCache // the last queue view computed
}

// testHooks are seams a test sets before Run; the server leaves them
// zero.
type testHooks struct {
	// splitMax replaces splitQueue; deciding runs while a cycle
	// decides (cycle.go). Written under the write lock, read by the loop.
	splitMax int
	deciding func()
	// readHook runs before each store read that an API reader makes
	// without the lock (reads.go).
	readHook func(what string)
}
