package orchestrator

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/sizes"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Job arrays (issue 11). An array is a record (its spec and throttle,
// persisted in the store's arrays table) and its tasks, each a normal job
// ARRAYID_INDEX with ArrayJobID and ArrayTaskID set. The books below keep,
// for each array, its tasks in index order and their counts by state, so
// that a cycle can hand the core an array's identical waiting tasks as one
// sched.Job with a Count (see snapshotArrays) instead of one entry each,
// and at most its throttle's headroom of them. This file holds the books,
// the submission and the start-up; arrays_sched.go the cycle's side;
// arrays_views.go what the API reads and changes.

// array is one job array's live state. Written by the loop only (write
// lock held); read under the read lock.
type array struct {
	rec   api.Array  // the record; rec.Counts are kept live by arrayMoved
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

// arrayBooks are the orchestrator's arrays.
type arrayBooks struct {
	byID    map[string]*array
	waiting map[string]*array        // arrays with queued tasks
	pend    map[string]sched.Pending // by array id: why its group waits, from the last cycle
}

func (b *arrayBooks) init() {
	if b.byID == nil {
		b.byID, b.waiting, b.pend = map[string]*array{}, map[string]*array{}, map[string]sched.Pending{}
	}
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

// arrayMoved keeps the books of j's array as j moves from one state to
// another (from "": j is new). Write lock held; called by transition.
func (o *Orchestrator) arrayMoved(j *api.Job, from, to api.State) {
	a := o.arr.byID[j.ArrayJobID]
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
		o.arr.waiting[a.rec.ID] = a
	} else {
		delete(o.arr.waiting, a.rec.ID)
	}
}

// arrayRepriority notes that a task's priority changed: one whose priority
// is not its array's waits on its own. Write lock held.
func (o *Orchestrator) arrayRepriority(j *api.Job) {
	a := o.arr.byID[j.ArrayJobID]
	if a == nil || j.State != api.StateQueued {
		return
	}
	if a.isOdd(j) {
		a.odd[j.ID] = j
	} else {
		delete(a.odd, j.ID)
	}
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

// newTask is task index idx of the array made from its template: queued,
// with the array's submission event.
func newTask(tmpl *api.Job, t *api.Job, id string, idx *int) {
	*t = *tmpl
	t.ID, t.ArrayJobID, t.ArrayTaskID = id+"_"+strconv.Itoa(*idx), id, idx
	t.State, t.Reason = api.StateQueued, api.ReasonSubmitted
	t.Events = []api.Event{{At: tmpl.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}}
	t.Allocation = []api.Allocation{}
}

// submitArray queues a job array in tx: its record, and one task per
// index. Only the record is written (store/arrays.go): a task's row
// follows with its first change, so the tasks are made here as
// transition would make them, without a row or an event row each. The
// limits count every task. Write lock held.
func (o *Orchestrator) submitArray(tx *txn, req *api.SubmitRequest, idemKey string, exempt bool) (submitResult, error) {
	spec, err := api.ParseArray(req.Array, o.maxArraySize())
	if err != nil {
		return submitResult{}, api.Invalid("array", "%s", err.Error())
	}
	j, err := jobspec.Parse(req, o.capacity())
	if err != nil {
		return submitResult{}, err
	}
	n := len(spec.Indexes)
	// The same checks as a job's (features.go); every task gets what
	// they fill in (its dependencies, a budget's hold).
	if err := o.on.admit(&feature.Submission{Job: &j, Request: req, Array: true, Tasks: n, Exempt: exempt, Now: tx.now}); err != nil {
		return submitResult{}, err
	}
	// sizes.go: the array counts once.
	o.sizes.Add(j.User, sizes.JobBytes(&j))
	id := o.newID(tx.now)
	j.Number = tx.takeNumber(id) // numbers.go: the array's, its tasks' too
	j.SubmittedAt = tx.now
	a := &array{odd: map[string]*api.Job{}, tasks: make([]*api.Job, n), tmpl: j, rec: api.Array{
		ID: id, Number: j.Number, Name: j.Name, User: j.User, Project: j.Project, Array: strings.TrimSpace(req.Array), Throttle: spec.Throttle,
		TaskCount: n, TaskMin: spec.Indexes[0], TaskMax: spec.Indexes[n-1], GPUCount: j.GPUCount, Nodes: j.Nodes,
		Priority: j.Priority, Command: j.Command, SubmittedAt: tx.now,
	}}
	o.arr.init()
	o.arr.byID[id] = a
	jobs := make([]api.Job, n) // one allocation for all the tasks
	for i := range spec.Indexes {
		t := &jobs[i]
		newTask(&a.tmpl, t, id, &spec.Indexes[i])
		a.tasks[i] = t
		o.jobs[t.ID] = t
		o.addOrder(t.ID)
	}
	for _, t := range a.tasks {
		o.setQueued(t, true)
		o.arrayMoved(t, "", api.StateQueued)
	}
	tx.batch.Arrays = append(tx.batch.Arrays, a.record())
	o.dirty = true
	if idemKey != "" {
		o.idem[idemKey] = id
		if tx.batch.Idempotency == nil {
			tx.batch.Idempotency = map[string]string{}
		}
		tx.batch.Idempotency[idemKey] = id
	}
	o.log.Debug("job array submitted", "array_id", id, "tasks", n, "user", j.User, "throttle", spec.Throttle)
	return submitResult{o.view(a.tasks[0], true), false}, nil
}

// maxArraySize is the most tasks one array may have.
func (o *Orchestrator) maxArraySize() int {
	if n := o.cfg.Limits.MaxArraySize; n > 0 {
		return n
	}
	return api.DefaultMaxArraySize
}

// checkArrayLimits checks that n more queued tasks fit the queue limits
// (checkLimits has checked one). Write lock held.
func (o *Orchestrator) checkArrayLimits(user string, n int, exempt bool) error {
	l := o.cfg.Limits
	if l.MaxQueueSize > 0 && len(o.queued)+n > l.MaxQueueSize {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "queue_full", Field: "array",
			Message: fmt.Sprintf("the queue has room for %d more jobs (the limit is %d); this array has %d tasks", max(l.MaxQueueSize-len(o.queued), 0), l.MaxQueueSize, n)}
	}
	if l.MaxQueuedPerUser > 0 && !exempt && o.queuedBy[user]+n > l.MaxQueuedPerUser {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "user_queue_full", Field: "array",
			Message: fmt.Sprintf("%s has %d jobs queued and the limit is %d per user; this array has %d tasks", user, o.queuedBy[user], l.MaxQueuedPerUser, n)}
	}
	return nil
}

// replayArray answers a submission replayed under an idempotency key that
// made an array: its first task, as the first answer was.
func (o *Orchestrator) replayArray(id string) (submitResult, bool) {
	a := o.arr.byID[id]
	if a == nil {
		return o.replayDone(id) // arrays_stored.go
	}
	return submitResult{o.view(a.tasks[0], true), true}, true
}

// arrayEnv adds the CORRAL_ARRAY_* variables of a task to env (a copy of
// the job's), and returns it.
func (o *Orchestrator) arrayEnv(j *api.Job, env map[string]string) map[string]string {
	a := o.arr.byID[j.ArrayJobID]
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

// arrayTasks adds to st.Jobs the tasks that have no row of their own yet
// (queued since their array's submission: see submitArray), made from
// their array's record, and gives tasks with a row the submission event
// that only the record holds; st.Jobs stays in id order. Before the loop
// runs, before st.Jobs is loaded.
func arrayTasks(st *store.State) {
	if len(st.Arrays) == 0 {
		return
	}
	have := make(map[string]*api.Job, len(st.Jobs))
	for i := range st.Jobs {
		if st.Jobs[i].ArrayJobID != "" {
			have[st.Jobs[i].ID] = &st.Jobs[i]
		}
	}
	for ri := range st.Arrays {
		r := &st.Arrays[ri]
		r.Template.SubmittedAt = r.Array.SubmittedAt
		for k := range r.Array.Tasks {
			idx := &r.Array.Tasks[k]
			id := r.Array.ID + "_" + strconv.Itoa(*idx)
			if j := have[id]; j != nil {
				if len(j.Events) == 0 || j.Events[0].From != "" {
					sub := api.Event{At: r.Array.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}
					j.Events = append([]api.Event{sub}, j.Events...)
				}
				continue
			}
			var t api.Job
			newTask(&r.Template, &t, r.Array.ID, idx)
			st.Jobs = append(st.Jobs, t)
		}
	}
	slices.SortFunc(st.Jobs, func(a, b api.Job) int { return strings.Compare(a.ID, b.ID) })
}

// loadArrays rebuilds the books from the store's records and the loaded
// jobs (o.jobs, with their states). Before the loop runs.
func (o *Orchestrator) loadArrays(recs []store.ArrayRecord) {
	o.arr.init()
	for _, r := range recs {
		rec := r.Array
		rec.Tasks = nil
		o.arr.byID[rec.ID] = &array{rec: rec, tmpl: r.Template, odd: map[string]*api.Job{}}
	}
	for _, id := range o.order {
		j := o.jobs[id]
		if a := o.arr.byID[j.ArrayJobID]; a != nil && j.ArrayTaskID != nil {
			a.tasks = append(a.tasks, j)
		}
	}
	for _, a := range o.arr.byID {
		slices.SortFunc(a.tasks, func(x, y *api.Job) int { return *x.ArrayTaskID - *y.ArrayTaskID })
		a.cursor = len(a.tasks)
		for i, t := range a.tasks {
			a.rec.Counts.Add(t.State, 1)
			if t.State == api.StateQueued {
				a.cursor = min(a.cursor, i)
				if a.isOdd(t) {
					a.odd[t.ID] = t
				}
			}
		}
		if a.rec.Counts.Queued > 0 {
			o.arr.waiting[a.rec.ID] = a
		}
	}
}
