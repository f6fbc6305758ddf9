package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/feature/refs"
	"github.com/corral-sched/corral/internal/jobbook"
)

// Job dependencies are the feature of package deps (o.deps): its state,
// its rules, its moments (features.go), its reads of the store, and the
// API's operation (deps.Ops, through FeatureOps.Deps). What is left here
// is what it reads of the orchestrator's memory (depJobs).

// DefaultDependencyTimeout is how long a job whose dependency can never
// be met stays queued before it is canceled, unless Config says otherwise.
const DefaultDependencyTimeout = deps.DefaultTimeout

// newDeps makes the dependencies feature over o's books.
func newDeps(o *Orchestrator) *deps.Tracker {
	cfg := deps.Config{Timeout: o.cfg.DependencyTimeout, MinIDPrefix: MinIDPrefix, Logger: o.log}
	if o.cfg.Store != nil { // a bare orchestrator of a unit test has none: memory only
		cfg.Store = o.cfg.Store
	}
	return deps.New(depJobs{o.jobs, o}, cfg)
}

// depJobs is what package deps reads of the orchestrator's books
// (deps.Jobs): the job books themselves (Get, All, Active, IsQueued), and
// what else memory, the store and the loop know. Its methods are called
// with the lock held.
type depJobs struct {
	*jobbook.Book
	o *Orchestrator
}

func (b depJobs) Recent(id string) (*api.Job, bool) { return b.o.found().Lookup(id) }
func (b depJobs) IsArray(id string) bool {
	return b.o.arr.IsArray(b.o.cfg.Store, id, b.o.log) // feature/arrays; a nil Store is none
}

func (b depJobs) Known(id string) bool {
	_, ok := b.o.found().LookupAny(id)
	return ok
}

func (b depJobs) Array(id string) ([]*api.Job, bool) {
	return b.o.arr.Tasks(id)
}

func (b depJobs) Number(ref string) (int64, string, bool) {
	return refs.NumberID(ref, b.o.refs.StoredNumber) // feature/refs: the store's number -> id
}

func (b depJobs) Cancel(tx feature.Tx, j *api.Job, reason, message string) {
	now := tx.Now()
	j.FinishedAt = &now
	ownTxn(tx).transition(j, api.StateCanceled, reason, message)
}
