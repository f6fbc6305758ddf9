// Package arrays keeps job arrays (docs/arrays.md): an array is a record
// (its spec and throttle, persisted in the store's arrays table) and its
// tasks, each a normal job ARRAYID_INDEX with ArrayJobID and ArrayTaskID
// set. Books keeps, for each array, its tasks in index order and their
// counts by state, so that a cycle can hand the core an array's
// identical waiting tasks as one sched.Job with a Count (AddGroups)
// instead of one entry each, and at most its throttle's headroom of them.
//
// What it reads of the orchestrator's books (the queue's counts, the live
// jobs, the jobs a transaction changed) comes through Jobs. The
// orchestrator's loop calls its methods with its write lock held (the
// read methods with a read lock), makes the jobs of an array's tasks part
// of its books, and makes the transactions its changes are written in.
//
//	submit: CheckSubmit ─▶ Add(tx) ─▶ batch.Arrays (the record; tasks have no row yet)
//	moves:  Moved ─▶ counts, cursor, odd tasks, the waiting arrays
//	cycle:  Admit, AddGroups ─▶ sched.Schedule ─▶ NotePending, Next
//	commit: BeforeCommit (done arrays' records and summaries) ─▶ Committed ─▶ Jobs.Forget
//	start:  AddTasks (tasks with no row) ─▶ the jobs loaded ─▶ Load
//
// An array is done when none of its tasks is queued or active any more.
// The batch that ends its last task also writes the array's record marked
// done and adds all its tasks to the store's summary of ended jobs; once
// that batch is committed the array and its tasks leave memory. Until it
// is done, an array keeps its ended tasks in memory: they are counted
// from there, not from the summary, so that no task is counted twice,
// before or after a restart.
package arrays

import (
	"fmt"
	"iter"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Jobs is what the feature reads of the orchestrator's books, and what it
// asks of them when arrays leave memory. Its methods are called with the
// orchestrator's write lock held, from the feature's own methods only.
type Jobs interface {
	// Queued is how many jobs are queued in all; QueuedBy how many of
	// them are user's.
	Queued() int
	QueuedBy(user string) int
	// All yields the live jobs in submission (id) order.
	All() iter.Seq[*api.Job]
	// Changed is the jobs tx has changed, by id (their rows are
	// written); the feature only reads it. A map rather than an
	// iterator: each commit asks, and this allocates nothing.
	Changed(tx feature.Tx) map[string]*api.Job
	// EndedRow is the store's summary of an ended job that ended at at.
	EndedRow(j *api.Job, at time.Time) store.EndedJob
	// Forget is told, once tx is committed, of the arrays it made done,
	// already out of the feature's books: their tasks leave the
	// orchestrator's memory.
	Forget(tx feature.Tx, done []Done)
}

// Done is an array that has left memory: its record, its template and its
// tasks, in index order.
type Done struct {
	Rec      *api.Array
	Template *api.Job
	Tasks    []*api.Job
}

// Config bounds arrays.
type Config struct {
	MaxSize          int // tasks of one array; 0: api.DefaultMaxArraySize
	MaxQueueSize     int // queued jobs in all (0: no limit)
	MaxQueuedPerUser int // queued jobs of one user (0: no limit; admins are exempt)
}

// array is one job array's live state.
type array struct {
	rec   api.Array  // the record; rec.Counts are kept live by move
	tmpl  api.Job    // what each task is made from (stored with the record)
	tasks []*api.Job // in index order
	// cursor: no task before it is queued. It moves back when a task is
	// requeued, forward when the task at it leaves the queue.
	cursor int
	// odd holds the queued tasks that do not wait like the rest (their own
	// priority, or a backoff after a loss): they enter the snapshot one by
	// one. The rest are identical and enter it as one group.
	odd map[string]*api.Job
}

// Books are the arrays in memory. Written by the loop only (write lock
// held); read under the read lock.
type Books struct {
	jobs    Jobs
	cfg     Config
	byID    map[string]*array
	waiting map[string]*array        // arrays with queued tasks
	pend    map[string]sched.Pending // by array id: why its group waits, from the last cycle
	// done are the arrays whose last task the batch being committed ends:
	// they leave memory once it is committed (BeforeCommit, Committed).
	done []*array
}

// New returns empty books over jobs.
func New(jobs Jobs, cfg Config) *Books {
	return &Books{jobs: jobs, cfg: cfg, byID: map[string]*array{}, waiting: map[string]*array{}, pend: map[string]sched.Pending{}}
}

// pos is the task's position in a.tasks.
func (a *array) pos(j *api.Job) int {
	i, _ := slices.BinarySearchFunc(a.tasks, *j.ArrayTaskID, func(t *api.Job, idx int) int { return *t.ArrayTaskID - idx })
	return i
}

// isOdd reports whether a queued task waits unlike its array's others.
func (a *array) isOdd(j *api.Job) bool {
	return j.NotBefore != nil || j.Priority != a.rec.Priority
}

// room is how many more tasks may become active: the throttle's headroom
// (math.MaxInt without a throttle; 0 or less: none).
func (a *array) room() int {
	if a.rec.Throttle <= 0 {
		return math.MaxInt
	}
	return a.rec.Throttle - a.rec.Counts.Active()
}

// firstPlain returns the first queued task, in index order, that is not
// odd; nil when there is none.
func (a *array) firstPlain() *api.Job {
	for _, t := range a.tasks[a.cursor:] {
		if t.State == api.StateQueued && a.odd[t.ID] == nil {
			return t
		}
	}
	return nil
}

// record is the array as the store keeps it: its spec with every task
// index, and its template.
func (a *array) record() store.ArrayRecord {
	r := store.ArrayRecord{Array: a.rec, Template: a.tmpl}
	r.Array.Tasks = make([]int, len(a.tasks))
	for i, t := range a.tasks {
		r.Array.Tasks[i] = *t.ArrayTaskID
	}
	return r
}

// Moved keeps the books of a task's array as the task moves from state
// to state (feature.Mover).
func (b *Books) Moved(_ feature.Tx, j *api.Job, e api.Event) {
	if j.ArrayJobID != "" {
		b.move(j, e.From, e.To)
	}
}

// move keeps the books of j's array as j moves from one state to another
// (from "": j is new).
func (b *Books) move(j *api.Job, from, to api.State) {
	a := b.byID[j.ArrayJobID]
	if a == nil {
		return
	}
	if from != "" {
		a.rec.Counts.Add(from, -1)
	}
	a.rec.Counts.Add(to, 1)
	switch {
	case to == api.StateQueued:
		if p := a.pos(j); p < a.cursor {
			a.cursor = p
		}
		if a.isOdd(j) {
			a.odd[j.ID] = j
		}
	case from == api.StateQueued:
		delete(a.odd, j.ID)
		for a.cursor < len(a.tasks) && a.tasks[a.cursor].State != api.StateQueued {
			a.cursor++
		}
	}
	if a.rec.Counts.Queued > 0 {
		b.waiting[a.rec.ID] = a
	} else {
		delete(b.waiting, a.rec.ID)
	}
}

// Repriority notes that a task's priority changed: one whose priority is
// not its array's waits on its own.
func (b *Books) Repriority(j *api.Job) {
	a := b.byID[j.ArrayJobID]
	if a == nil || j.State != api.StateQueued {
		return
	}
	if a.isOdd(j) {
		a.odd[j.ID] = j
	} else {
		delete(a.odd, j.ID)
	}
}

// CheckSubmit checks that an array's tasks fit the queue limits, which
// have checked one task (feature.SubmitCheck).
func (b *Books) CheckSubmit(s *feature.Submission) error {
	if !s.Array {
		return nil
	}
	user, n := s.Job.User, s.Tasks
	queued := b.jobs.Queued()
	if l := b.cfg.MaxQueueSize; l > 0 && queued+n > l {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "queue_full", Field: "array",
			Message: fmt.Sprintf("the queue has room for %d more jobs (the limit is %d); this array has %d tasks", max(l-queued, 0), l, n)}
	}
	if l := b.cfg.MaxQueuedPerUser; l > 0 && !s.Exempt && b.jobs.QueuedBy(user)+n > l {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "user_queue_full", Field: "array",
			Message: fmt.Sprintf("%s has %d jobs queued and the limit is %d per user; this array has %d tasks", user, b.jobs.QueuedBy(user), l, n)}
	}
	return nil
}

// Spec parses a submission's array expression within the size limit.
func (b *Books) Spec(req *api.SubmitRequest) (api.ArraySpec, error) {
	n := b.cfg.MaxSize
	if n <= 0 {
		n = api.DefaultMaxArraySize
	}
	spec, err := api.ParseArray(req.Array, n)
	if err != nil {
		return api.ArraySpec{}, api.Invalid("array", "%s", err.Error())
	}
	return spec, nil
}

// Add makes array id of spec's tasks from tmpl (admitted, numbered, its
// SubmittedAt set), queued, and adds its record to tx's batch. Only the
// record is written (store/arrays.go): a task's row follows with its
// first change, so the tasks are made here as a transition would make
// them, without a row or an event row each. It returns the tasks, in
// index order: the caller makes them jobs of its books and queues them.
func (b *Books) Add(tx feature.Tx, id string, tmpl *api.Job, spec api.ArraySpec, expr string) []*api.Job {
	n := len(spec.Indexes)
	a := &array{odd: map[string]*api.Job{}, tasks: make([]*api.Job, n), tmpl: *tmpl, rec: api.Array{
		ID: id, Number: tmpl.Number, Name: tmpl.Name, User: tmpl.User, Project: tmpl.Project, Array: strings.TrimSpace(expr), Throttle: spec.Throttle,
		TaskCount: n, TaskMin: spec.Indexes[0], TaskMax: spec.Indexes[n-1], GPUCount: tmpl.GPUCount, Nodes: tmpl.Nodes,
		Priority: tmpl.Priority, Command: tmpl.Command, SubmittedAt: tx.Now(),
	}}
	b.byID[id] = a
	jobs := make([]api.Job, n) // one allocation for all the tasks
	for i := range spec.Indexes {
		t := &jobs[i]
		NewTask(&a.tmpl, t, id, &spec.Indexes[i])
		a.tasks[i] = t
	}
	for _, t := range a.tasks {
		b.move(t, "", api.StateQueued)
	}
	batch := tx.Batch()
	batch.Arrays = append(batch.Arrays, a.record())
	return a.tasks
}

// NewTask makes t task index idx of array id from its template: queued,
// with the array's submission event.
func NewTask(tmpl *api.Job, t *api.Job, id string, idx *int) {
	*t = *tmpl
	t.ID, t.ArrayJobID, t.ArrayTaskID = id+"_"+strconv.Itoa(*idx), id, idx
	t.State, t.Reason = api.StateQueued, api.ReasonSubmitted
	t.Events = []api.Event{{At: tmpl.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}}
	t.Allocation = []api.Allocation{}
}

// Env adds the CORRAL_ARRAY_* variables of a task to env (a copy of the
// job's), and returns it.
func (b *Books) Env(j *api.Job, env map[string]string) map[string]string {
	a := b.byID[j.ArrayJobID]
	if a == nil || j.ArrayTaskID == nil {
		return env
	}
	if env == nil {
		env = make(map[string]string, 5)
	}
	env["CORRAL_ARRAY_JOB_ID"] = a.rec.ID
	env["CORRAL_ARRAY_TASK_ID"] = strconv.Itoa(*j.ArrayTaskID)
	env["CORRAL_ARRAY_TASK_COUNT"] = strconv.Itoa(a.rec.TaskCount)
	env["CORRAL_ARRAY_TASK_MIN"] = strconv.Itoa(a.rec.TaskMin)
	env["CORRAL_ARRAY_TASK_MAX"] = strconv.Itoa(a.rec.TaskMax)
	return env
}
