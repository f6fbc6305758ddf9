package orchestrator

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Job arrays (issue 11). An array is a record (its spec and throttle,
// persisted in the store's arrays table) and its tasks, each a normal job
// ARRAYID_INDEX with ArrayJobID and ArrayTaskID set. The books below keep,
// for each array, its tasks in index order and their counts by state, so
// that a cycle can hand the core an array's identical waiting tasks as one
// sched.Job with a Count (see snapshotArrays) instead of one entry each,
// and at most its throttle's headroom of them.

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

// grouped reports whether j is a task that enters the snapshot with its
// array's group (snapshotArrays) rather than on its own. Tasks that wait
// on dependencies go the plain queue's way, one by one (within their
// throttle, arrayAdmit), so that whatever holds a job for its
// dependencies holds them too.
func grouped(j *api.Job) bool { return j.ArrayJobID != "" && j.DependsOn == "" }

// arrayAdmit returns a function that tells, for each task handed to the
// plain queue's snapshot one by one, whether its array's throttle lets it
// in: at most the array's headroom of them, in the order asked. Lock held.
func (o *Orchestrator) arrayAdmit() func(j *api.Job) bool {
	var room map[string]int
	return func(j *api.Job) bool {
		a := o.arr.byID[j.ArrayJobID]
		if a == nil || a.rec.Throttle <= 0 {
			return true
		}
		if room == nil {
			room = map[string]int{}
		}
		n, ok := room[a.rec.ID]
		if !ok {
			n = a.room()
		}
		if n <= 0 {
			return false
		}
		room[a.rec.ID] = n - 1
		return true
	}
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
	j, err := validateSubmit(req, o.capacity())
	if err != nil {
		return submitResult{}, err
	}
	if err := o.checkLimits(&j, exempt); err != nil {
		return submitResult{}, err
	}
	n := len(spec.Indexes)
	if err := o.checkArrayLimits(j.User, n, exempt); err != nil {
		return submitResult{}, err
	}
	id := o.newID(tx.now)
	j.SubmittedAt = tx.now
	a := &array{odd: map[string]*api.Job{}, tasks: make([]*api.Job, n), tmpl: j, rec: api.Array{
		ID: id, Name: j.Name, User: j.User, Project: j.Project, Array: strings.TrimSpace(req.Array), Throttle: spec.Throttle,
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
		o.order = append(o.order, t.ID)
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
		return submitResult{}, false
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

// snapshotArrays appends to snap.Queue the waiting tasks of every array
// that may start some: its odd tasks one by one, then its identical ones
// as one sched.Job standing for them all (Count), both within the
// throttle's headroom. It returns the arrays by the id of their group's
// entry (its first waiting task). Lock held (read is enough).
//
// An array whose tasks have dependencies is left to the plain queue's
// path (see grouped).
func (o *Orchestrator) snapshotArrays(snap *sched.Snapshot, est func(*api.Job) (time.Duration, bool)) map[string]*array {
	if len(o.arr.waiting) == 0 {
		return nil
	}
	ids := make([]string, 0, len(o.arr.waiting))
	for id := range o.arr.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	groups := make(map[string]*array, len(ids))
	for _, id := range ids {
		a := o.arr.waiting[id]
		room := a.room()
		if room <= 0 || a.tmpl.DependsOn != "" {
			continue // at its throttle; or its tasks wait on dependencies, one by one (grouped)
		}
		if len(a.odd) > 0 {
			odd := make([]*api.Job, 0, len(a.odd))
			for _, t := range a.odd {
				odd = append(odd, t)
			}
			slices.SortFunc(odd, func(x, y *api.Job) int { return *x.ArrayTaskID - *y.ArrayTaskID })
			for _, t := range odd[:min(len(odd), room)] {
				snap.Queue = append(snap.Queue, schedJob(t, est))
			}
			room -= min(len(odd), room)
		}
		n := min(a.rec.Counts.Queued-len(a.odd), room)
		if n <= 0 {
			continue
		}
		rep := a.firstPlain()
		if rep == nil {
			continue
		}
		sj := schedJob(rep, est)
		sj.Count = n
		snap.Queue = append(snap.Queue, sj)
		groups[rep.ID] = a
	}
	return groups
}

// schedJob is a queued job as the core sees it.
func schedJob(j *api.Job, est func(*api.Job) (time.Duration, bool)) sched.Job {
	e, given := est(j)
	sj := sched.Job{
		ID: j.ID, User: j.User, Project: j.Project, Priority: int(j.Priority), SubmittedAt: j.SubmittedAt,
		GPUs: j.GPUCount, Nodes: j.Nodes, MinMemoryMiB: int64(j.GPUMemoryGB * 1024), GPUType: j.GPUType,
		Estimate: e, EstimateGiven: given, NodeLabels: j.NodeLabels,
	}
	if j.NotBefore != nil {
		sj.NotBefore = *j.NotBefore
	}
	return sj
}

// startTarget is the job a cycle's start of id is for: id itself, or,
// when id is an array's group entry that has already started, the next
// identical waiting task of its array. Write lock held.
func (o *Orchestrator) startTarget(id string, groups map[string]*array) *api.Job {
	j := o.jobs[id]
	if a := groups[id]; a != nil && j.State != api.StateQueued {
		if t := a.firstPlain(); t != nil {
			return t
		}
	}
	return j
}

// notePending records why each array's group waits (res's Pending of its
// entry). Write lock held.
func (o *Orchestrator) notePending(groups map[string]*array, res *sched.Result) {
	if len(o.arr.pend) > 0 {
		clear(o.arr.pend)
	}
	if len(groups) == 0 {
		return
	}
	for _, p := range res.Pending {
		if a := groups[p.JobID]; a != nil {
			o.arr.pend[a.rec.ID] = p
		}
	}
}

// arrayPending fills in why a queued task waits when the last cycle did
// not say so of the task itself: its array is at its throttle, or the
// array's identical tasks wait together for the reason of the first.
// Read lock held.
func (o *Orchestrator) arrayPending(j *api.Job, v *api.Job) {
	a := o.arr.byID[j.ArrayJobID]
	if a == nil {
		return
	}
	if a.room() <= 0 {
		v.PendingReason = api.ReasonArrayThrottle
		v.PendingMessage = fmt.Sprintf("array %s runs at most %d tasks at once, and %d are active", a.rec.ID, a.rec.Throttle, a.rec.Counts.Active())
		return
	}
	if p, ok := o.arr.pend[a.rec.ID]; ok {
		v.QueuePosition, v.PendingReason, v.PendingMessage = p.Position, p.Reason, p.Message()
		return
	}
	if a.rec.Throttle > 0 {
		v.PendingReason = api.ReasonArrayThrottle
		v.PendingMessage = fmt.Sprintf("array %s runs at most %d tasks at once: this one waits for earlier tasks to start or end", a.rec.ID, a.rec.Throttle)
	}
}

// summary is the array's record with its counts and overall state. Read
// lock held.
func (a *array) summary() api.Array {
	s := a.rec
	c := s.Counts
	switch {
	case c.Active() > 0:
		s.State = api.StateRunning
	case c.Queued > 0:
		s.State = api.StateQueued
	case c.Failed > 0:
		s.State = api.StateFailed
	case c.Canceled > 0:
		s.State = api.StateCanceled
	default:
		s.State = api.StateCompleted
	}
	return s
}

// resolveArray returns the array that id names: its id exactly, or a
// unique prefix of at least MinIDPrefix characters. ok is false when id
// names no array. Read lock held.
func (o *Orchestrator) resolveArray(id string) (*array, bool, error) {
	if a := o.arr.byID[id]; a != nil {
		return a, true, nil
	}
	if len(id) < MinIDPrefix || strings.Contains(id, "_") {
		return nil, false, nil
	}
	var found *array
	n := 0
	for aid, a := range o.arr.byID {
		if strings.HasPrefix(aid, id) {
			found = a
			n++
		}
	}
	if n == 0 {
		return nil, false, nil
	}
	// A prefix shared with jobs outside the array is ambiguous too: ids
	// begin with their submission time.
	others := 0
	for _, cand := range o.order {
		if strings.HasPrefix(cand, id) && (n > 1 || o.jobs[cand].ArrayJobID != found.rec.ID) {
			others++
		}
	}
	if n == 1 && others == 0 {
		return found, true, nil
	}
	return nil, true, &api.Error{Status: http.StatusConflict, Code: "ambiguous_id", Field: "array_id",
		Message: fmt.Sprintf("%q is the prefix of %d arrays' ids and %d other jobs' ids; give more characters", id, n, others)}
}

// ResolveArrayID returns the id of the array that id names (exactly, or by
// a unique prefix of at least MinIDPrefix characters): 404 when none does,
// 409 ambiguous_id when several do.
func (o *Orchestrator) ResolveArrayID(id string) (string, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	a, ok, err := o.resolveArray(id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", api.NotFound("no job array %q", id)
	}
	return a.rec.ID, nil
}

// arrayNotJob is ResolveJobID's answer for an id that names no job but an
// array (nil when it names none): job routes take task ids.
func (o *Orchestrator) arrayNotJob(id string) error {
	a, ok, _ := o.resolveArray(id)
	if !ok || a == nil {
		return nil
	}
	return &api.Error{Status: http.StatusNotFound, Code: "is_array",
		Message: fmt.Sprintf("%s is a job array, not a job: see GET /arrays/%s, or name a task as %s_INDEX", a.rec.ID, a.rec.ID, a.rec.ID)}
}

// Array returns the array that id names (exactly or by prefix), with its
// counts by state and its task indexes.
func (o *Orchestrator) Array(id string) (api.Array, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	a, ok, err := o.resolveArray(id)
	if err != nil {
		return api.Array{}, err
	}
	if !ok {
		return api.Array{}, api.NotFound("no job array %q", id)
	}
	s := a.summary()
	s.Tasks = make([]int, len(a.tasks))
	for i, t := range a.tasks {
		s.Tasks[i] = *t.ArrayTaskID
	}
	return s, nil
}

// ArraySummaries returns the summaries (counts, no task list) of the
// arrays named, in the order given, skipping unknown ids.
func (o *Orchestrator) ArraySummaries(ids []string) []api.Array {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]api.Array, 0, len(ids))
	for _, id := range ids {
		if a := o.arr.byID[id]; a != nil {
			out = append(out, a.summary())
		}
	}
	return out
}

// ArrayOwner returns the user and project of an array.
func (o *Orchestrator) ArrayOwner(id string) (user, project string, ok bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	a := o.arr.byID[id]
	if a == nil {
		return "", "", false
	}
	return a.rec.User, a.rec.Project, true
}

// SetThrottle changes how many of an array's tasks may be active at once
// (0: no limit); the change is persisted with the array's record and takes
// effect at the next cycle. Tasks already running are never stopped.
func (o *Orchestrator) SetThrottle(ctx context.Context, id string, n int) (api.Array, error) {
	if n < 0 {
		return api.Array{}, api.Invalid("throttle", "must be 0 (no limit) or more, not %d", n)
	}
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		a := o.arr.byID[id]
		if a == nil {
			return nil, api.NotFound("no job array %q", id)
		}
		if a.rec.Throttle != n {
			a.rec.Throttle = n
			tx.batch.Arrays = append(tx.batch.Arrays, a.record())
			o.dirty = true
			o.log.Info("job array throttle changed", "array_id", id, "throttle", n)
		}
		return nil, nil
	})
	if err != nil {
		return api.Array{}, err
	}
	return o.Array(id)
}

// CancelArray cancels every unfinished task of an array, as Cancel does
// each: queued tasks at once, running ones with SIGTERM, then SIGKILL
// after grace (0: the configured default). stopping reports whether some
// were running and are being stopped. All of it is one transaction.
func (o *Orchestrator) CancelArray(ctx context.Context, id string, grace time.Duration) (arr api.Array, stopping bool, err error) {
	if grace <= 0 {
		grace = o.cfg.CancelGrace
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		a := o.arr.byID[id]
		if a == nil {
			return nil, api.NotFound("no job array %q", id)
		}
		if a.rec.Counts.Unfinished() == 0 {
			return nil, api.Conflict("wrong_state", "every task of array %s has already ended", id)
		}
		stopping := false
		for _, j := range a.tasks {
			switch {
			case j.State.Terminal():
			case j.State == api.StateQueued:
				now := tx.now
				j.FinishedAt = &now
				tx.transition(j, api.StateCanceled, api.ReasonCanceled, "canceled while queued (its array was canceled)")
			case !j.CancelRequested:
				j.CancelRequested = true
				tx.touch(j)
				stopping = true
				jid, attempt := j.ID, j.RetryCount
				tx.after = append(tx.after, func() {
					if err := o.cfg.Executor.Stop(context.WithoutCancel(ctx), jid, attempt, grace); err != nil {
						o.log.Error("stop job", "job_id", jid, "err", err)
					}
				})
			default:
				stopping = true
			}
		}
		o.log.Info("job array canceled", "array_id", id, "stopping", stopping)
		return stopping, nil
	})
	if err != nil {
		return api.Array{}, false, err
	}
	arr, err = o.Array(id)
	return arr, v.(bool), err
}

// arrayPositions gives the queued tasks that have no position of their
// own their array's (its first task's that has one), or else a place
// after every other job: they wait for their array's throttle. It returns
// the summaries of the arrays with queued tasks, in id order. Read lock
// held.
func (o *Orchestrator) arrayPositions(rows []api.QueuedJob) []api.Array {
	if len(o.arr.waiting) == 0 {
		return nil
	}
	last := 0
	first := map[string]int{}
	for _, q := range rows {
		last = max(last, q.QueuePosition)
		if q.ArrayJobID != "" && q.QueuePosition > 0 {
			if p, ok := first[q.ArrayJobID]; !ok || q.QueuePosition < p {
				first[q.ArrayJobID] = q.QueuePosition
			}
		}
	}
	for i := range rows {
		q := &rows[i]
		if q.ArrayJobID == "" || q.QueuePosition > 0 {
			continue
		}
		if p, ok := first[q.ArrayJobID]; ok {
			q.QueuePosition = p
		} else {
			q.QueuePosition = last + 1
		}
	}
	ids := make([]string, 0, len(o.arr.waiting))
	for id := range o.arr.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]api.Array, len(ids))
	for i, id := range ids {
		out[i] = o.arr.waiting[id].summary()
	}
	return out
}

// dashboardArrayRows is how many of an array's queued tasks the
// dashboard's updates carry (the first in queue order): it shows an array
// as one row with its counts, and these when the row is opened.
const dashboardArrayRows = 100

// trimArrays keeps at most n queued rows of each job array in q, in
// order; other rows, the statistics and the arrays' counts are kept.
func trimArrays(q api.QueueResponse, n int) api.QueueResponse {
	if len(q.Arrays) == 0 {
		return q
	}
	seen := make(map[string]int, len(q.Arrays))
	rows := q.QueuedJobs[:0:0]
	for _, r := range q.QueuedJobs {
		if r.ArrayJobID != "" {
			if seen[r.ArrayJobID] >= n {
				continue
			}
			seen[r.ArrayJobID]++
		}
		rows = append(rows, r)
	}
	q.QueuedJobs = rows
	return q
}
