// Package attach counts the live connections attached to each job: the
// shells of corral shell and corral alloc, and the notebook proxy's
// connections. Idle reclaim of interactive work reads it: a job that has
// a connection attached is in use, whatever its GPUs do.
//
// One Registry is shared by the API server (which opens and closes
// attachments) and the orchestrator (which asks). It is safe for use by
// several goroutines.
package attach

import (
	"sync"
	"time"
)

// Registry holds the attachments of every job.
type Registry struct {
	mu   sync.Mutex
	open map[string]int       // job id -> connections attached now
	last map[string]time.Time // job id -> when its last connection closed
	now  func() time.Time
}

// New returns an empty registry; now is its clock (nil: time.Now).
func New(now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{open: map[string]int{}, last: map[string]time.Time{}, now: now}
}

// Open records a connection attached to the job and returns the function
// that records its end. Calling done more than once counts once.
func (r *Registry) Open(jobID string) (done func()) {
	r.mu.Lock()
	r.open[jobID]++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.open[jobID]--; r.open[jobID] <= 0 {
				delete(r.open, jobID)
				r.last[jobID] = r.now()
			}
		})
	}
}

// Attached returns how many connections the job has now, and, when it has
// none, when the last one closed (zero: never attached).
func (r *Registry) Attached(jobID string) (n int, lastClosed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open[jobID], r.last[jobID]
}

// Forget drops what the registry knows of a job that has ended.
func (r *Registry) Forget(jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, jobID)
	if r.open[jobID] == 0 {
		delete(r.open, jobID)
	}
}
