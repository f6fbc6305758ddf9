package deps

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The rules: what each job a term names must do for the term to be met,
// how the terms of an expression combine, and what a held job's
// why-pending says.

// entry is what a pass keeps about one job.
type entry struct {
	expr Expr
	// preds[i][k] is the job that term i's k-th id names, looked up
	// once (a job that ended is read from the store: ended.go); nil
	// where the id is the id of an array in memory; for a done array, the
	// task that decides the term, or a stand-in (ended.go).
	preds     [][]*api.Job
	singleton bool // it has a singleton term
	check     check
	pass      uint64 // the pass that set check
}

// newEntry parses j's expression and looks up the jobs it names.
func (tr *Tracker) newEntry(j *api.Job) *entry {
	d := &entry{expr: tr.expr(j)}
	d.singleton = singleton(d.expr)
	d.preds = make([][]*api.Job, len(d.expr.Terms))
	for i, t := range d.expr.Terms {
		d.preds[i] = make([]*api.Job, len(t.IDs))
		for k, id := range t.IDs {
			p := tr.jobs.Get(id)
			if p == nil {
				if _, array := tr.jobs.Array(id); !array {
					// A job that ended: its final state, from the
					// store, or a placeholder if it was pruned; or a
					// done array: the task that decides the term
					// (ended.go).
					p = tr.predecessorOf(j, t.Kind, id)
				}
			}
			d.preds[i][k] = p
		}
	}
	return d
}

// eval is what one pass shares between the jobs it looks at. The
// zero eval (views) shares nothing.
type eval struct {
	// running maps each singleton key to the job that holds it: an
	// active one, or one let through earlier in the pass. Nil: look
	// among the active jobs.
	running map[singletonKey]*api.Job
	// memo holds the verdict of each array for each kind of term: many
	// jobs wait on one array (a sweep, then its evaluation). Nil: none.
	memo map[memoKey]check
}

type memoKey struct {
	kind Kind
	id   string
}

// verdict is where a dependency stands.
type verdict uint8

const (
	met     verdict = iota // the job may be scheduled
	waiting                // not yet
	never                  // it can no longer be met
)

// check is a job's dependency verdict and what it is about: the first
// job it waits for (or that can no longer let it run), with the kind of
// its term.
type check struct {
	verdict verdict
	kind    Kind
	culprit *api.Job
	more    int       // waiting: further jobs it waits for
	since   time.Time // never: when it became unmeetable
}

// singletonKey is what singleton counts jobs by.
type singletonKey struct{ user, name string }

// checkJob works out j's verdict from the current states.
func (tr *Tracker) checkJob(j *api.Job, d *entry, ev *eval) check {
	var out check
	first := true
	for i, t := range d.expr.Terms {
		c := tr.checkTerm(j, t, d.preds[i], ev)
		switch {
		case first:
			out, first = c, false
		case d.expr.Any:
			out = anyOf(out, c)
		default:
			out = allOf(out, c)
		}
		if out.verdict == met && d.expr.Any {
			break
		}
	}
	if out.verdict == never {
		out.since = later(out.since, queuedAt(j))
	}
	return out
}

// checkTerm is the verdict of one term: all its ids' jobs must meet it.
// preds are the jobs its ids name (nil for arrays).
func (tr *Tracker) checkTerm(j *api.Job, t Term, preds []*api.Job, ev *eval) check {
	out := check{verdict: met, kind: t.Kind}
	if t.Kind == Singleton {
		var holder *api.Job
		if ev.running != nil {
			holder = ev.running[singletonKey{j.User, j.Name}]
		} else {
			holder = tr.activeNamed(j.User, j.Name)
		}
		if holder != nil && holder.ID != j.ID {
			out.verdict, out.culprit = waiting, holder
		}
		return out
	}
	for i, id := range t.IDs {
		if p := preds[i]; p != nil {
			out = allOf(out, predecessor(t.Kind, p))
			continue
		}
		if t.Kind == AfterCorr && j.ArrayTaskID != nil {
			// Task i waits for task i of the other array, if it has one.
			if p := tr.jobs.Get(id + "_" + strconv.Itoa(*j.ArrayTaskID)); p != nil && p.ArrayJobID == id {
				out = allOf(out, predecessor(t.Kind, p))
			}
			continue
		}
		k := memoKey{t.Kind, id}
		c, ok := ev.memo[k]
		if !ok {
			c = check{verdict: met, kind: t.Kind}
			for _, task := range tr.arrayTasks(id) {
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

// activeNamed returns an active job of user named name, or nil. (Ranging
// over Active in a function of its own keeps the caller's variables off
// the heap: the loop's body is a closure passed through an interface.)
func (tr *Tracker) activeNamed(user, name string) *api.Job {
	for a := range tr.jobs.Active() {
		if a.User == user && a.Name == name {
			return a
		}
	}
	return nil
}

// predecessor is the verdict of one predecessor p for a term of kind k.
func predecessor(k Kind, p *api.Job) check {
	c := check{verdict: verdictOf(k, p.State), kind: k}
	if c.verdict != met {
		c.culprit = p
	}
	if c.verdict == never {
		c.since = finished(p)
	}
	return c
}

// verdictOf says whether a predecessor in state s meets a term of kind k.
func verdictOf(k Kind, s api.State) verdict {
	if s == statePruned {
		return prunedVerdict(k) // ended.go
	}
	switch k {
	case After: // started, or ended (canceled before it started, as in Slurm)
		if s == api.StateRunning || s.Terminal() {
			return met
		}
	case AfterAny:
		if s.Terminal() {
			return met
		}
	case AfterOK, AfterCorr:
		switch s {
		case api.StateCompleted:
			return met
		case api.StateFailed, api.StateCanceled:
			return never
		}
	case AfterNotOK:
		switch s {
		case api.StateFailed, api.StateCanceled:
			return met
		case api.StateCompleted:
			return never
		}
	}
	return waiting
}

// allOf combines two verdicts of which both must be met: never wins
// (the earliest), then waiting (the first, counting the others).
func allOf(a, b check) check {
	switch {
	case a.verdict == never && b.verdict == never:
		if b.since.Before(a.since) {
			return b
		}
		return a
	case a.verdict == never:
		return a
	case b.verdict == never:
		return b
	case a.verdict == waiting && b.verdict == waiting:
		a.more += 1 + b.more
		return a
	case a.verdict == waiting:
		return a
	}
	return b
}

// anyOf combines two verdicts of which one is enough: met wins, then
// waiting; never only when both are, since the later of the two.
func anyOf(a, b check) check {
	switch {
	case a.verdict == met:
		return a
	case b.verdict == met:
		return b
	case a.verdict == waiting && b.verdict == waiting:
		a.more += 1 + b.more
		return a
	case a.verdict == waiting:
		return a
	case b.verdict == waiting:
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
func (c check) reason() string {
	if c.verdict == never {
		return api.ReasonDependencyNeverSatisfied
	}
	return api.ReasonDependency
}

// message says, for people, what the job waits for or why it never will
// run; timeout is the --dependency-timeout. It reads the
// culprit's state.
func (c check) message(timeout time.Duration) string {
	if c.culprit == nil {
		return ""
	}
	id, state := c.culprit.ID, c.culprit.State
	if c.verdict == never {
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
	if c.kind == Singleton {
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
func goal(k Kind) string {
	switch k {
	case After:
		return "start"
	case AfterOK, AfterCorr:
		return "complete"
	case AfterNotOK:
		return "fail"
	}
	return "end"
}

// queuedAt is when the job last entered the queue (its submission, or
// its latest requeue).
func queuedAt(j *api.Job) time.Time {
	for i := len(j.Events) - 1; i >= 0; i-- {
		if j.Events[i].To == api.StateQueued {
			return j.Events[i].At
		}
	}
	return j.SubmittedAt
}
