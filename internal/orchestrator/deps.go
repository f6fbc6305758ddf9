package orchestrator

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
)

// Job dependencies (issue 11): a queued job whose depends_on is not met
// is left out of the scheduling snapshot, so the core never sees it. The
// verdict is worked out from the jobs' current states at every cycle and
// never remembered as "met": a predecessor that goes back to the queue
// (preempted, node lost) holds its dependents that have not started
// again. A dependency that can no longer be met (afterok on a failed job)
// cancels its job, reason dependency_never_satisfied, once
// Config.DependencyTimeout has passed since it became so.
//
// An id in an expression names a job, or an array: the ArrayJobID that
// its tasks (jobs ARRAYID_INDEX) share, standing for all of them.

// DefaultDependencyTimeout is how long a job whose dependency can never
// be met stays queued before it is canceled, unless Config says otherwise.
const DefaultDependencyTimeout = 24 * time.Hour

// depState is what the orchestrator keeps about dependencies. Written by
// the loop with the write lock held; read with the read lock.
type depState struct {
	// jobs holds, for queued jobs with a depends_on, the parsed
	// expression and the last pass's verdict, by job id. Entries are
	// reused from pass to pass and pruned now and then.
	jobs    map[string]*depEntry
	pass    uint64     // eligible passes so far
	held    int        // jobs the last pass held back
	buf     []*api.Job // the last pass's eligible queue (reused)
	heldBuf []*api.Job // the last pass's held jobs (reused)
}

// depEntry is what a pass keeps about one job.
type depEntry struct {
	expr deps.Expr
	// preds[i][k] is the job that term i's k-th id names, looked up
	// once (a job that ended is read from the store: finished.go); nil
	// where the id is the id of an array in memory; for a done array, the
	// task that decides the term, or a stand-in (deps_arrays.go).
	preds     [][]*api.Job
	singleton bool // it has a singleton term
	check     depCheck
	pass      uint64 // the pass that set check
}

// newDepEntry parses j's expression and looks up the jobs it names.
// Lock held.
func (o *Orchestrator) newDepEntry(j *api.Job) *depEntry {
	d := &depEntry{expr: o.expr(j)}
	d.singleton = singleton(d.expr)
	d.preds = make([][]*api.Job, len(d.expr.Terms))
	for i, t := range d.expr.Terms {
		d.preds[i] = make([]*api.Job, len(t.IDs))
		for k, id := range t.IDs {
			d.preds[i][k] = o.jobs[id]
			if d.preds[i][k] == nil && o.arr.byID[id] == nil {
				// A job that ended: its final state, from the store
				// (finished.go), or a placeholder if it was pruned
				// (deps_pruned.go); or a done array: the task that
				// decides the term (deps_arrays.go).
				d.preds[i][k] = o.predecessorOf(j, t.Kind, id)
			}
		}
	}
	return d
}

// depEval is what one pass shares between the jobs it looks at. The
// zero depEval (views) shares nothing.
type depEval struct {
	// running maps each singleton key to the job that holds it: an
	// active one, or one let through earlier in the pass. Nil: look
	// among the active jobs.
	running map[singletonKey]*api.Job
	// memo holds the verdict of each array for each kind of term: many
	// jobs wait on one array (a sweep, then its evaluation). Nil: none.
	memo map[memoKey]depCheck
}

type memoKey struct {
	kind deps.Kind
	id   string
}

// depVerdict is where a dependency stands.
type depVerdict uint8

const (
	depMet   depVerdict = iota // the job may be scheduled
	depWait                    // not yet
	depNever                   // it can no longer be met
)

// depCheck is a job's dependency verdict and what it is about: the first
// job it waits for (or that can no longer let it run), with the kind of
// its term.
type depCheck struct {
	verdict depVerdict
	kind    deps.Kind
	culprit *api.Job
	more    int       // depWait: further jobs it waits for
	since   time.Time // depNever: when it became unmeetable
}

// dependencyTimeout is Config.DependencyTimeout read: 0 means the
// default, a negative value at once.
func (o *Orchestrator) dependencyTimeout() time.Duration {
	switch d := o.cfg.DependencyTimeout; {
	case d == 0:
		return DefaultDependencyTimeout
	case d < 0:
		return 0
	default:
		return d
	}
}

// arrayTasks returns the tasks of the job array id, in index order (none:
// id is no array). Lock held.
func (o *Orchestrator) arrayTasks(id string) []*api.Job {
	if a := o.arr.byID[id]; a != nil {
		return a.tasks
	}
	return nil
}

// resolveDepID returns the id that id names in a dependency: a job's,
// an array's, or the one job or array whose id starts with id (at least
// MinIDPrefix characters; a prefix of an array's id names the array, not
// one of its tasks). Errors name depends_on. Lock held.
func (o *Orchestrator) resolveDepID(id string) (string, error) {
	if n, task, ok := parseNumberRef(id); ok { // numbers.go: 1234, 1234_7
		full, err := o.storedNumberID(n)
		if err != nil {
			return "", api.Invalid("depends_on", "no job number %d", n)
		}
		if task != "" {
			full += "_" + task
		}
		id = full
	}
	if _, ok := o.jobs[id]; ok || len(o.arrayTasks(id)) > 0 {
		return id, nil
	}
	if _, ok := o.lookupAny(id); ok || o.isArray(id) { // a job that ended (finished.go), a done array
		return id, nil
	}
	if len(id) < MinIDPrefix {
		return "", api.Invalid("depends_on", "no job or array %q (a prefix needs at least %d characters)", id, MinIDPrefix)
	}
	found := map[string]bool{}
	for _, cand := range o.order {
		if !strings.HasPrefix(cand, id) {
			continue
		}
		j, live := o.jobs[cand]
		if !live {
			continue // ended: from the store, below
		}
		if j.ArrayJobID != "" && strings.HasPrefix(j.ArrayJobID, id) {
			cand = j.ArrayJobID
		}
		found[cand] = true
	}
	for _, cand := range o.storedDependencyIDs(id, len(found)+2) { // deps_arrays.go: ended jobs, arrays
		if _, live := o.jobs[cand]; !live {
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

// setDependsOn checks raw as j's dependency expression and sets
// j.DependsOn to it with every id resolved to a full one. array says j is
// (a task of) a job array, which aftercorr needs. j.ID is empty for a job
// being submitted. It refuses, with a 422 naming depends_on, bad syntax,
// unknown or ambiguous ids, references to j itself (or its array),
// aftercorr on what is not an array, singleton without a name, and a
// cycle. Write lock held.
func (o *Orchestrator) setDependsOn(j *api.Job, raw string, array bool) error {
	e, err := deps.Parse(raw)
	if err != nil {
		return api.Invalid("depends_on", "%v", err)
	}
	for ti := range e.Terms {
		t := &e.Terms[ti]
		switch {
		case t.Kind == deps.Singleton && j.Name == "":
			return api.Invalid("depends_on", "singleton needs the job to have a name (name, --name)")
		case t.Kind == deps.AfterCorr && !array && j.ArrayJobID == "":
			return api.Invalid("depends_on", "aftercorr is for job arrays, and this job is not one")
		}
		for i, id := range t.IDs {
			full, err := o.resolveDepID(id)
			if err != nil {
				return err
			}
			if full == j.ID || (j.ArrayJobID != "" && full == j.ArrayJobID) {
				return api.Invalid("depends_on", "%s refers to the job itself", id)
			}
			if t.Kind == deps.AfterCorr && !o.isArray(full) {
				return api.Invalid("depends_on", "aftercorr needs an array's id; %s is a job", full)
			}
			t.IDs[i] = full
		}
	}
	if j.ID != "" {
		if path := o.depCycle(j, e); path != nil {
			return api.Invalid("depends_on", "would make a cycle: %s", strings.Join(path, " -> "))
		}
	}
	j.DependsOn = e.String()
	delete(o.deps.jobs, j.ID) // re-parsed from DependsOn at the next pass
	return nil
}

// depCycle returns a path of ids by which the expression e, given to j,
// would lead back to j (or to j's array), or nil. Lock held.
func (o *Orchestrator) depCycle(j *api.Job, e deps.Expr) []string {
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
		nj, ok := o.jobs[id]
		if !ok { // an array: it leads to each of its tasks
			for _, t := range o.arrayTasks(id) {
				if p := walk(t.ID, path); p != nil {
					return p
				}
			}
			return nil
		}
		if nj.DependsOn == "" {
			return nil
		}
		for _, t := range o.expr(nj).Terms {
			for _, pid := range t.IDs {
				if p := walk(pid, path); p != nil {
					return p
				}
			}
		}
		return nil
	}
	for _, t := range e.Terms {
		for _, id := range t.IDs {
			if p := walk(id, []string{j.ID}); p != nil {
				return p
			}
		}
	}
	return nil
}

// expr returns j's parsed dependency expression. A stored expression
// that no longer parses (it was checked when set) counts as none. Lock
// held.
func (o *Orchestrator) expr(j *api.Job) deps.Expr {
	if d := o.deps.jobs[j.ID]; d != nil {
		return d.expr
	}
	e, err := deps.Parse(j.DependsOn)
	if err != nil {
		o.log.Warn("stored dependency does not parse; ignored", "job_id", j.ID, "err", err)
	}
	return e
}

// singletonKey is what singleton counts jobs by.
type singletonKey struct{ user, name string }

// checkDeps works out j's verdict from the current states. Lock held.
func (o *Orchestrator) checkDeps(j *api.Job, d *depEntry, ev *depEval) depCheck {
	var out depCheck
	first := true
	for i, t := range d.expr.Terms {
		c := o.checkTerm(j, t, d.preds[i], ev)
		switch {
		case first:
			out, first = c, false
		case d.expr.Any:
			out = anyOf(out, c)
		default:
			out = allOf(out, c)
		}
		if out.verdict == depMet && d.expr.Any {
			break
		}
	}
	if out.verdict == depNever {
		out.since = later(out.since, queuedAt(j))
	}
	return out
}

// checkTerm is the verdict of one term: all its ids' jobs must meet it.
// preds are the jobs its ids name (nil for arrays).
func (o *Orchestrator) checkTerm(j *api.Job, t deps.Term, preds []*api.Job, ev *depEval) depCheck {
	out := depCheck{verdict: depMet, kind: t.Kind}
	if t.Kind == deps.Singleton {
		var holder *api.Job
		if ev.running != nil {
			holder = ev.running[singletonKey{j.User, j.Name}]
		} else {
			for id := range o.active {
				if a := o.jobs[id]; a.User == j.User && a.Name == j.Name {
					holder = a
					break
				}
			}
		}
		if holder != nil && holder.ID != j.ID {
			out.verdict, out.culprit = depWait, holder
		}
		return out
	}
	for i, id := range t.IDs {
		if p := preds[i]; p != nil {
			out = allOf(out, predecessor(t.Kind, p))
			continue
		}
		if t.Kind == deps.AfterCorr && j.ArrayTaskID != nil {
			// Task i waits for task i of the other array, if it has one.
			if p, ok := o.jobs[id+"_"+strconv.Itoa(*j.ArrayTaskID)]; ok && p.ArrayJobID == id {
				out = allOf(out, predecessor(t.Kind, p))
			}
			continue
		}
		k := memoKey{t.Kind, id}
		c, ok := ev.memo[k]
		if !ok {
			c = depCheck{verdict: depMet, kind: t.Kind}
			for _, task := range o.arrayTasks(id) {
				c = allOf(c, predecessor(t.Kind, task))
			}
			if ev.memo != nil {
				ev.memo[k] = c
			}
		}
		out = allOf(out, c)
	}
	return out
}

// predecessor is the verdict of one predecessor p for a term of kind k.
func predecessor(k deps.Kind, p *api.Job) depCheck {
	c := depCheck{verdict: verdictOf(k, p.State), kind: k}
	if c.verdict != depMet {
		c.culprit = p
	}
	if c.verdict == depNever {
		c.since = finished(p)
	}
	return c
}

// verdictOf says whether a predecessor in state s meets a term of kind k.
func verdictOf(k deps.Kind, s api.State) depVerdict {
	if s == statePruned {
		return prunedVerdict(k) // deps_pruned.go
	}
	switch k {
	case deps.After: // started, or ended (canceled before it started, as in Slurm)
		if s == api.StateRunning || s.Terminal() {
			return depMet
		}
	case deps.AfterAny:
		if s.Terminal() {
			return depMet
		}
	case deps.AfterOK, deps.AfterCorr:
		switch s {
		case api.StateCompleted:
			return depMet
		case api.StateFailed, api.StateCanceled:
			return depNever
		}
	case deps.AfterNotOK:
		switch s {
		case api.StateFailed, api.StateCanceled:
			return depMet
		case api.StateCompleted:
			return depNever
		}
	}
	return depWait
}

// allOf combines two verdicts of which both must be met: never wins
// (the earliest), then waiting (the first, counting the others).
func allOf(a, b depCheck) depCheck {
	switch {
	case a.verdict == depNever && b.verdict == depNever:
		if b.since.Before(a.since) {
			return b
		}
		return a
	case a.verdict == depNever:
		return a
	case b.verdict == depNever:
		return b
	case a.verdict == depWait && b.verdict == depWait:
		a.more += 1 + b.more
		return a
	case a.verdict == depWait:
		return a
	}
	return b
}

// anyOf combines two verdicts of which one is enough: met wins, then
// waiting; never only when both are, since the later of the two.
func anyOf(a, b depCheck) depCheck {
	switch {
	case a.verdict == depMet:
		return a
	case b.verdict == depMet:
		return b
	case a.verdict == depWait && b.verdict == depWait:
		a.more += 1 + b.more
		return a
	case a.verdict == depWait:
		return a
	case b.verdict == depWait:
		return b
	}
	a.since = later(a.since, b.since)
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// finished is when a job ended (zero when it has not).
func finished(j *api.Job) time.Time {
	if j.FinishedAt == nil {
		return time.Time{}
	}
	return *j.FinishedAt
}

// reason is the pending reason for a check that is not met.
func (c depCheck) reason() string {
	if c.verdict == depNever {
		return api.ReasonDependencyNeverSatisfied
	}
	return api.ReasonDependency
}

// message says, for people, what the job waits for or why it never will
// run; timeout is the --dependency-timeout. Lock held (it reads the
// culprit's state).
func (c depCheck) message(timeout time.Duration) string {
	if c.culprit == nil {
		return ""
	}
	id, state := c.culprit.ID, c.culprit.State
	if c.verdict == depNever {
		when := "at the next scheduling cycle"
		if timeout > 0 {
			when = "at " + c.since.Add(timeout).UTC().Format("2006-01-02 15:04:05 MST")
		}
		what := "it " + string(state)
		if state == statePruned {
			what = "its record was deleted (--keep-history), so its outcome is unknown"
		}
		return fmt.Sprintf("%s on job %s can never be met: %s; the job will be canceled %s (--dependency-timeout %s)",
			c.kind, id, what, when, shortDuration(timeout))
	}
	if c.kind == deps.Singleton {
		return fmt.Sprintf("waits for job %s of the same user and name (singleton) to end; it is %s", id, state)
	}
	more := ""
	if c.more > 0 {
		more = fmt.Sprintf(" (and for %d more jobs)", c.more)
	}
	return fmt.Sprintf("waits for job %s (%s) to %s; it is %s%s", id, c.kind, goal(c.kind), state, more)
}

// shortDuration writes d as "24h", "90s", "1h30m" (no zero units).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// goal is what a predecessor must do for a kind of term.
func goal(k deps.Kind) string {
	switch k {
	case deps.After:
		return "start"
	case deps.AfterOK, deps.AfterCorr:
		return "complete"
	case deps.AfterNotOK:
		return "fail"
	}
	return "end"
}
