package orchestrator

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/refs"
	"github.com/corral-sched/corral/internal/store"
)

// Short numbers and what a person may type for a job are the feature of
// package refs (o.refs): the last number given, and the rules of
// resolution. What is left here is what it reads of the orchestrator's
// books (refBooks): memory under the read lock, the store without it
// (reads.go), and the exported methods the API calls.

// MinIDPrefix is the fewest characters of a job id that may name the job
// by prefix, as in git and docker.
const MinIDPrefix = refs.MinIDPrefix

// newRefs makes the feature of short numbers over o's books.
func newRefs(o *Orchestrator) *refs.Resolver { return refs.New(refBooks{o}, o.log) }

// takeNumber gives the job or array id the next number, written with tx.
// Loop only (write lock held).
func (tx *txn) takeNumber(id string) int64 { return tx.o.refs.Take(tx, id) }

// storedNumberID reads the id of the job or array numbered n from the
// store; found is false when none is (or there is no store: a bare
// orchestrator of a unit test). Lock held or not.
func (o *Orchestrator) storedNumberID(n int64) (id string, found bool, err error) {
	if o.cfg.Store == nil {
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	return o.cfg.Store.NumberID(ctx, n)
}

// refBooks is what package refs reads of the orchestrator's books
// (refs.Jobs, refs.View). View takes the read lock and Done releases it;
// the store's methods are called without it, each after the test hook
// that checks so (reads.go).
type refBooks struct{ o *Orchestrator }

func (b refBooks) View() refs.View {
	b.o.mu.RLock()
	return b
}

func (b refBooks) Done() { b.o.mu.RUnlock() }

func (b refBooks) Job(id string) bool {
	_, ok := b.o.lookup(id) // finished.go: live, or recently ended
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

func (b refBooks) JobsWithPrefix(prefix string, into map[string]string) {
	o := b.o
	// o.order.ids is in id order (but for orderUnsorted): the jobs that start
	// with prefix are one run of it.
	if !o.order.unsorted {
		i, _ := slices.BinarySearch(o.order.ids, prefix)
		for ; i < len(o.order.ids) && strings.HasPrefix(o.order.ids[i], prefix); i++ {
			if j, live := o.jobs[o.order.ids[i]]; live {
				into[j.ID] = j.ArrayJobID
			}
		}
		return
	}
	for _, cand := range o.order.ids {
		if j, live := o.jobs[cand]; live && strings.HasPrefix(cand, prefix) {
			into[j.ID] = j.ArrayJobID
		}
	}
}

func (b refBooks) All() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, j := range b.o.jobs {
			if !yield(j) {
				return
			}
		}
	}
}

func (b refBooks) NumberID(n int64) (string, bool, error) {
	b.o.beforeRead("job number")
	return b.o.storedNumberID(n)
}

func (b refBooks) Stored(id string) bool {
	b.o.beforeRead("job")
	_, err := b.o.stored(id) // finished.go: a job that ended
	return err == nil
}

func (b refBooks) StoredJobIDs(prefix string, limit int) []string {
	b.o.beforeRead("job ids")
	return b.o.storedIDs("job ids", prefix, limit, Store.JobIDsWithPrefix) // finished.go
}

func (b refBooks) StoredArrayIDs(prefix string, limit int) []string {
	b.o.beforeRead("array ids")
	return b.o.storedArrayIDs(prefix, limit) // arrays_stored.go
}

func (b refBooks) Named(user, name string, limit int) ([]store.Named, error) {
	if b.o.cfg.Store == nil { // a bare orchestrator of a unit test
		return nil, nil
	}
	b.o.beforeRead("job names")
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	return b.o.cfg.Store.NamedJobs(ctx, user, name, limit)
}
