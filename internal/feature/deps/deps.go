package deps

import (
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// DefaultTimeout is how long a job whose dependency can never be met
// stays queued before it is canceled, unless New is told otherwise.
const DefaultTimeout = 24 * time.Hour

// Jobs is what dependencies read of the orchestrator's books. Every
// method is called with the loop's lock held; those that read the store
// bound the read in time themselves.
type Jobs interface {
	// Get returns a job memory holds and has not evicted: queued,
	// running, or ended but not yet out of memory; nil when none.
	Get(id string) *api.Job
	// All yields the jobs Get holds, in submission order.
	All() iter.Seq[*api.Job]
	// Active yields the jobs starting or running.
	Active() iter.Seq[*api.Job]
	// IsQueued reports whether the job id is in the queue.
	IsQueued(id string) bool
	// Recent returns a job from memory: one Get holds, or one of the
	// recently ended (possibly without its command and env).
	Recent(id string) (*api.Job, bool)
	// Known reports whether memory or the store holds the job id.
	Known(id string) bool
	// Array returns the tasks of the array id in memory, in index
	// order; false when memory holds no array id.
	Array(id string) ([]*api.Job, bool)
	// IsArray reports whether id is an array's, in memory or done.
	IsArray(id string) bool
	// Number reads a job's number as a person types it ("1234",
	// "1234_7": a task of the array numbered 1234) and returns the id it
	// names, "" when no job or array has the number n (or the store
	// cannot say); ok is false when ref is not a number.
	Number(ref string) (n int64, id string, ok bool)
	// Cancel ends the queued job j in tx: canceled, for reason.
	Cancel(tx feature.Tx, j *api.Job, reason, message string)
}

// Tracker is the dependencies feature: the parsed expressions of the
// queued jobs that have one and the last pass's verdicts, kept for the
// views. Written by the loop with the write lock held; read with the
// read lock.
type Tracker struct {
	jobs      Jobs
	store     Store         // nil: memory only
	timeout   time.Duration // the dependency timeout, read (Timeout)
	minPrefix int
	log       *slog.Logger

	// entries holds, for queued jobs with a depends_on, the parsed
	// expression and the last pass's verdict, by job id. Entries are
	// reused from pass to pass and pruned now and then.
	entries map[string]*entry
	pass    uint64     // eligible passes so far
	held    int        // jobs the last pass held back
	buf     []*api.Job // the last pass's eligible queue (reused)
	heldBuf []*api.Job // the last pass's held jobs (reused)
}

// Config is the feature's settings.
type Config struct {
	// Timeout is how long a job whose dependency can never be met waits
	// before it is canceled: 0 means DefaultTimeout, a negative value at
	// once.
	Timeout time.Duration
	// MinIDPrefix is the fewest characters of a job's or an array's id
	// that a depends_on may give for the whole id.
	MinIDPrefix int
	// Store is read for the jobs that left memory; nil: memory only (a
	// bare orchestrator of a unit test).
	Store  Store
	Logger *slog.Logger // nil: slog.Default
}

// New returns the feature, reading the orchestrator's books through
// jobs.
func New(jobs Jobs, c Config) *Tracker {
	timeout := c.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < 0:
		timeout = 0
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Tracker{jobs: jobs, store: c.Store, timeout: timeout, minPrefix: c.MinIDPrefix, log: c.Logger}
}

// Timeout is the dependency timeout: how long a job whose dependency
// can never be met stays queued.
func (tr *Tracker) Timeout() time.Duration { return tr.timeout }

// CheckSubmit checks the submission's depends_on and sets its job's to
// it, every id resolved (feature.SubmitCheck): Set, where an array's
// tasks each get it.
func (tr *Tracker) CheckSubmit(s *feature.Submission) error {
	return tr.Set(s.Job, s.Request.DependsOn, s.Array)
}

// Moved forgets what the tracker kept of a job that has ended
// (feature.Mover): an ended job never waits again.
func (tr *Tracker) Moved(_ feature.Tx, j *api.Job, e api.Event) {
	if e.To.Terminal() && tr.entries != nil {
		delete(tr.entries, j.ID)
	}
}

// ForgetArray drops what the tracker kept of the jobs that name the
// array id, as the array leaves memory: the next pass makes their
// entries again, reading the array's outcome from the store (ended.go)
// rather than from its tasks in memory.
func (tr *Tracker) ForgetArray(id string) {
	for jid, d := range tr.entries {
		for _, term := range d.expr.Terms {
			if containsID(term.IDs, id) {
				delete(tr.entries, jid)
				break
			}
		}
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Held is how many jobs the last pass held back.
func (tr *Tracker) Held() int { return tr.held }

// Set checks raw as j's dependency expression and sets j.DependsOn to
// it with every id resolved to a full one. array says j is (a task of) a
// job array, which aftercorr needs. j.ID is empty for a job being
// submitted. It refuses, with a 422 naming depends_on, bad syntax,
// unknown or ambiguous ids, references to j itself (or its array),
// aftercorr on what is not an array, singleton without a name, and a
// cycle.
func (tr *Tracker) Set(j *api.Job, raw string, array bool) error {
	e, err := Parse(raw)
	if err != nil {
		return api.Invalid("depends_on", "%v", err)
	}
	for ti := range e.Terms {
		term := &e.Terms[ti]
		switch {
		case term.Kind == Singleton && j.Name == "":
			return api.Invalid("depends_on", "singleton needs the job to have a name (name, --name)")
		case term.Kind == AfterCorr && !array && j.ArrayJobID == "":
			return api.Invalid("depends_on", "aftercorr is for job arrays, and this job is not one")
		}
		for i, id := range term.IDs {
			full, err := tr.resolve(id)
			if err != nil {
				return err
			}
			if full == j.ID || (j.ArrayJobID != "" && full == j.ArrayJobID) {
				return api.Invalid("depends_on", "%s refers to the job itself", id)
			}
			if term.Kind == AfterCorr && !tr.jobs.IsArray(full) {
				return api.Invalid("depends_on", "aftercorr needs an array's id; %s is a job", full)
			}
			term.IDs[i] = full
		}
	}
	if j.ID != "" {
		if path := tr.cycle(j, e); path != nil {
			return api.Invalid("depends_on", "would make a cycle: %s", strings.Join(path, " -> "))
		}
	}
	j.DependsOn = e.String()
	delete(tr.entries, j.ID) // re-parsed from DependsOn at the next pass
	return nil
}

// arrayTasks returns the tasks of the job array id in memory, in index
// order (none: id is no array in memory).
func (tr *Tracker) arrayTasks(id string) []*api.Job {
	tasks, _ := tr.jobs.Array(id)
	return tasks
}

// resolve returns the id that id names in a dependency: a job's, an
// array's, or the one job or array whose id starts with id (at least
// Config.MinIDPrefix characters; a prefix of an array's id names the
// array, not one of its tasks). Errors name depends_on.
func (tr *Tracker) resolve(id string) (string, error) {
	if n, full, ok := tr.jobs.Number(id); ok { // 1234, 1234_7
		if full == "" {
			return "", api.Invalid("depends_on", "no job number %d", n)
		}
		id = full
	}
	if tr.jobs.Get(id) != nil || len(tr.arrayTasks(id)) > 0 {
		return id, nil
	}
	if tr.jobs.Known(id) || tr.jobs.IsArray(id) { // a job that ended, a done array
		return id, nil
	}
	if len(id) < tr.minPrefix {
		return "", api.Invalid("depends_on", "no job or array %q (a prefix needs at least %d characters)", id, tr.minPrefix)
	}
	found := map[string]bool{}
	for j := range tr.jobs.All() {
		cand := j.ID
		if !strings.HasPrefix(cand, id) {
			continue
		}
		if j.ArrayJobID != "" && strings.HasPrefix(j.ArrayJobID, id) {
			cand = j.ArrayJobID
		}
		found[cand] = true
	}
	for _, cand := range tr.storedIDs(id, len(found)+2) { // ended jobs, arrays
		if tr.jobs.Get(cand) == nil {
			found[cand] = true
		}
	}
	switch len(found) {
	case 0:
		return "", api.Invalid("depends_on", "no job or array %q", id)
	case 1:
		for cand := range found {
			return cand, nil
		}
	}
	return "", api.Invalid("depends_on", "%q is the prefix of %d jobs' or arrays' ids; give more characters", id, len(found))
}

// cycle returns a path of ids by which the expression e, given to j,
// would lead back to j (or to j's array), or nil.
func (tr *Tracker) cycle(j *api.Job, e Expr) []string {
	self := func(id string) bool { return id == j.ID || (j.ArrayJobID != "" && id == j.ArrayJobID) }
	seen := map[string]bool{}
	var walk func(id string, path []string) []string
	walk = func(id string, path []string) []string {
		path = append(path, id)
		if self(id) {
			return path
		}
		if seen[id] {
			return nil
		}
		seen[id] = true
		nj := tr.jobs.Get(id)
		if nj == nil { // an array: it leads to each of its tasks
			for _, task := range tr.arrayTasks(id) {
				if p := walk(task.ID, path); p != nil {
					return p
				}
			}
			return nil
		}
		if nj.DependsOn == "" {
			return nil
		}
		for _, term := range tr.expr(nj).Terms {
			for _, pid := range term.IDs {
				if p := walk(pid, path); p != nil {
					return p
				}
			}
		}
		return nil
	}
	for _, term := range e.Terms {
		for _, id := range term.IDs {
			if p := walk(id, []string{j.ID}); p != nil {
				return p
			}
		}
	}
	return nil
}

// expr returns j's parsed dependency expression. A stored expression
// that no longer parses (it was checked when set) counts as none.
func (tr *Tracker) expr(j *api.Job) Expr {
	if d := tr.entries[j.ID]; d != nil {
		return d.expr
	}
	e, err := Parse(j.DependsOn)
	if err != nil {
		tr.log.Warn("stored dependency does not parse; ignored", "job_id", j.ID, "err", err)
	}
	return e
}
