package orchestrator

import (
	"strings"

	"github.com/corral-sched/corral/internal/feature/refs"
	"github.com/corral-sched/corral/internal/jobbook"
)

// Short numbers and what a person may type for a job are the feature of
// package refs (o.refs): the last number given, the rules of resolution
// and the store's reads; the API calls it through FeatureOps.Refs. What
// is left here is what it reads of the orchestrator's memory (refBooks),
// under the read lock.

// MinIDPrefix is the fewest characters of a job id that may name the job
// by prefix, as in git and docker.
const MinIDPrefix = refs.MinIDPrefix

// newRefs makes the feature of short numbers over o's books and store.
func newRefs(o *Orchestrator) *refs.Resolver {
	// BeforeRead: the test hook (reads.go). A bare orchestrator of a unit
	// test has no store: memory only.
	cfg := refs.Config{BeforeRead: o.beforeRead, Log: o.log}
	if o.cfg.Store != nil {
		cfg.Store = o.cfg.Store
	}
	return refs.New(refBooks{o.jobs, o}, cfg)
}

// takeNumber gives the job or array id the next number, written with tx.
// Loop only (write lock held).
func (tx *txn) takeNumber(id string) int64 { return tx.o.refs.Take(tx, id) }

// refBooks is what package refs reads of the orchestrator's memory
// (refs.Jobs, refs.View): the job books themselves (WithPrefix, All), the
// recently ended jobs and the arrays. View takes the read lock and Done
// releases it; package refs reads the store itself, without it.
type refBooks struct {
	*jobbook.Book
	o *Orchestrator
}

func (b refBooks) View() refs.View {
	b.o.mu.RLock()
	return b
}

func (b refBooks) Done() { b.o.mu.RUnlock() }

func (b refBooks) Job(id string) bool {
	_, ok := b.o.found().Lookup(id) // live, or recently ended
	return ok
}

func (b refBooks) Array(id string) bool { return b.o.arr.Has(id) }

func (b refBooks) ArraysWithPrefix(prefix string, into map[string]bool) {
	for aid := range b.o.arr.IDs() {
		if strings.HasPrefix(aid, prefix) {
			into[aid] = true
		}
	}
}
