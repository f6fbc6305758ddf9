package orchestrator

import (
	"errors"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/store"
)

// Readers and the lock. The loop holds the write lock while it
// mutates memory and commits; a reader that held the read lock across a
// store query (a page of 1,000 ended jobs out of a 500 MB store took 97 s)
// kept the loop waiting for the write lock, and every later reader behind
// it (sync.RWMutex queues readers behind a waiting writer): submissions
// and agent reports stalled, and nodes were then declared lost. So a
// reader copies what memory contributes under the read lock, releases it,
// reads the store without it, and merges. What the store returns is a
// commit as new as memory was or newer (a job leaves memory only after
// the commit that ended it), so a job listed from memory and found again
// in the store is listed once, and one that ended meanwhile is found in
// the store.

// beforeRead runs the test hook, if any, before a store read made without
// the lock.
func (o *Orchestrator) beforeRead(what string) {
	if o.test.readHook != nil {
		o.test.readHook(what)
	}
}

// jobAnywhere returns a job's view from memory (live, or recently ended),
// or else from the store, read without the lock; false when neither holds
// it (or the store cannot be read). A job leaves memory only after the
// commit that ended it, so one memory does not hold is in the store.
func (o *Orchestrator) jobAnywhere(id string, withEvents bool) (api.Job, bool) {
	o.mu.RLock()
	if j, ok := o.found().Lookup(id); ok && !o.gone.Slim(id) { // sizes.go: a slim copy is not the whole job
		v := o.view(j, withEvents)
		o.mu.RUnlock()
		return v, true
	}
	policy := o.policy.Policy
	o.mu.RUnlock()
	o.beforeRead("job")
	j, err := o.found().Stored(id)
	if err != nil {
		if !errors.Is(err, store.ErrNoJob) {
			o.log.Warn("read an ended job from the store", "job_id", id, "err", err)
		}
		return api.Job{}, false
	}
	v := readview.Ended(&j, withEvents)
	v.Policy = policy // as view gives it
	return v, true
}
