// Package refs is the feature of short numbers and references: what a
// person may type for a job or a job array, and the ids it names.
//
// Each job and each job array gets a number, unique in the cluster and
// increasing ("1234"; the tasks of array 1234 are "1234_7"), which people
// type instead of its id. The loop, the one writer, keeps the last number
// given in memory (read from the store's state at recovery, after a
// leader has fenced the store); a submission takes the next one and
// writes it with the job, in the batch that commits it: a number is
// durable exactly when its job is, and the store refuses one given twice.
//
// A reference resolves in three steps: what memory holds is copied from
// a View (the loop's read lock held), the store is read without it, and
// the answer is computed from both copies. It may be
//
//   - a number, 1234: the job or array numbered so;
//   - a task, 1234_7 or PREFIX_7: task 7 of array 1234, or of the array
//     whose id is PREFIX or starts with it;
//   - an id, or a unique prefix of at least MinIDPrefix characters;
//   - else a name, when the caller's jobs and arrays of that name are
//     exactly one.
package refs

import (
	"iter"
	"log/slog"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// MinIDPrefix is the fewest characters of a job id that may name the job
// by prefix, as in git and docker.
const MinIDPrefix = 6

// Jobs is what references read of the orchestrator's memory: a View,
// opened under the loop's read lock. The store is read (Store) with no
// View open, never under the lock.
type Jobs interface {
	// View opens a read-only view of memory: nothing changes it until its
	// Done is called. The store must not be read while it is open.
	View() View
}

// View is memory as it is while the view is open (under the loop's read
// lock).
type View interface {
	// Job reports whether memory holds the job id: live, or recently
	// ended.
	Job(id string) bool
	// Array reports whether memory holds the array id (one not done).
	Array(id string) bool
	// ArraysWithPrefix adds to into the ids of the arrays in memory that
	// start with prefix.
	ArraysWithPrefix(prefix string, into map[string]bool)
	// WithPrefix yields the live jobs whose ids start with prefix.
	WithPrefix(prefix string) iter.Seq[*api.Job]
	// All yields the live jobs, in no order.
	All() iter.Seq[*api.Job]
	// Done closes the view.
	Done()
}

// Resolver is the feature: the last number given, and the rules that
// turn what a person typed into an id. The last number is written by the
// loop only; resolving reads it not at all, so any goroutine may resolve.
type Resolver struct {
	jobs       Jobs
	store      Store
	beforeRead func(what string)
	log        *slog.Logger
	last       int64 // the last number given; loop only
}

// Config is what the feature needs besides the books' memory.
type Config struct {
	// Store is read for what memory no longer holds; nil: memory only
	// (a bare orchestrator of a unit test).
	Store Store
	// BeforeRead, when set, runs before each store read a resolution
	// makes, naming it (a test's hook checks that no lock is held then).
	BeforeRead func(what string)
	// Log takes a failed read's warning; nil: slog.Default.
	Log *slog.Logger
}

// New returns the feature, reading the orchestrator's memory through
// jobs and its store through cfg.Store.
func New(jobs Jobs, cfg Config) *Resolver {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Resolver{jobs: jobs, store: cfg.Store, beforeRead: cfg.BeforeRead, log: cfg.Log}
}

// Load sets the last number given from the store's, at recovery.
func (r *Resolver) Load(st *store.State) {
	r.last = st.MaxNumber
	for i := range st.Jobs { // numbers are written with their jobs: none is larger, but never go back
		r.last = max(r.last, st.Jobs[i].Number)
	}
	for i := range st.Arrays {
		r.last = max(r.last, st.Arrays[i].Array.Number)
	}
}

// Take gives the job or array id the next number, written with tx. Loop
// only.
func (r *Resolver) Take(tx feature.Tx, id string) int64 {
	r.last++
	b := tx.Batch()
	b.Numbers = append(b.Numbers, store.NumberRow{Number: r.last, ID: id})
	return r.last
}

// ParseNumber reads "1234" or "1234_7": the number, and the task's index
// as typed ("" for none). ok is false for anything else.
func ParseNumber(ref string) (n int64, task string, ok bool) {
	num, task, hasTask := strings.Cut(ref, "_")
	if !allDigits(num) || (hasTask && !allDigits(task)) {
		return 0, "", false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, task, true
}

func allDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// cutTask splits PREFIX_INDEX (the index all digits) into its parts.
func cutTask(ref string) (prefix, task string, ok bool) {
	i := strings.LastIndexByte(ref, '_')
	if i <= 0 || !allDigits(ref[i+1:]) {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

// NumberID reads a job's number as a person types it ("1234", "1234_7":
// a task of the array numbered 1234) and returns the id it names, read
// through read (the store's number -> id); id is "" when no job or array
// has the number n, or the store cannot say. ok is false when ref is not
// a number.
func NumberID(ref string, read func(n int64) (id string, found bool, err error)) (n int64, id string, ok bool) {
	n, task, ok := ParseNumber(ref)
	if !ok {
		return 0, "", false
	}
	id, found, err := read(n)
	if err != nil || !found {
		return n, "", true
	}
	if task != "" {
		id += "_" + task
	}
	return n, id, true
}
