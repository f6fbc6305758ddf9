package arrays

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// entry is a queued job as a core would see it.
func entry(j *api.Job) sched.Job { return sched.Job{ID: j.ID, User: j.User, GPUs: j.GPUCount} }

func TestAddQueuesTasksAndWritesTheRecord(t *testing.T) {
	f := &fakeJobs{}
	b := New(f, Config{})
	tx, tasks := submit(b, f, "jarr", " 0-4%2 ")
	if len(tasks) != 5 || tasks[3].ID != "jarr_3" || *tasks[3].ArrayTaskID != 3 || tasks[3].State != api.StateQueued {
		t.Fatalf("tasks %+v", tasks)
	}
	if len(tx.batch.Arrays) != 1 || tx.batch.Arrays[0].Array.Array != "0-4%2" || !slices.Equal(tx.batch.Arrays[0].Array.Tasks, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("batch arrays %+v", tx.batch.Arrays)
	}
	rec, _ := b.Live("jarr")
	if rec.Counts.Queued != 5 || rec.Throttle != 2 || !b.Knows("jarr") {
		t.Fatalf("record %+v", rec)
	}
	env := b.Env(tasks[3], nil)
	if env["CORRAL_ARRAY_JOB_ID"] != "jarr" || env["CORRAL_ARRAY_TASK_ID"] != "3" || env["CORRAL_ARRAY_TASK_COUNT"] != "5" || env["CORRAL_ARRAY_TASK_MAX"] != "4" {
		t.Fatalf("env %v", env)
	}
}

func TestCheckSubmitCountsEveryTask(t *testing.T) {
	f := &fakeJobs{queued: 5, queuedBy: map[string]int{"ana": 3}}
	b := New(f, Config{MaxQueueSize: 10, MaxQueuedPerUser: 6})
	check := func(n int, exempt bool) error {
		return b.CheckSubmit(&feature.Submission{Job: &api.Job{User: "ana"}, Array: true, Tasks: n, Exempt: exempt})
	}
	var e *api.Error
	if err := check(3, false); err != nil {
		t.Fatal(err)
	}
	if err := check(4, false); !errors.As(err, &e) || e.Code != "user_queue_full" {
		t.Fatalf("4 tasks: %v", err)
	}
	if err := check(4, true); err != nil {
		t.Fatalf("4 tasks, exempt: %v", err)
	}
	if err := check(6, true); !errors.As(err, &e) || e.Code != "queue_full" {
		t.Fatalf("6 tasks: %v", err)
	}
	if err := b.CheckSubmit(&feature.Submission{Job: &api.Job{User: "ana"}, Tasks: 100}); err != nil {
		t.Fatalf("not an array: %v", err)
	}
	if _, err := New(f, Config{MaxSize: 3}).Spec(&api.SubmitRequest{Array: "0-3"}); !errors.As(err, &e) || e.Field != "array" {
		t.Fatalf("4 tasks past a size of 3: %v", err)
	}
}

// TestGroupsWithinTheThrottle: the identical waiting tasks enter the
// snapshot as one entry with a Count within the throttle's headroom, odd
// ones one by one; a start of the group's entry maps to the next task.
func TestGroupsWithinTheThrottle(t *testing.T) {
	f := &fakeJobs{}
	b := New(f, Config{})
	tx, tasks := submit(b, f, "jarr", "0-9%4")
	move(b, tx, tasks[0], api.StateRunning)
	tasks[5].Priority = api.PriorityHigh
	b.Repriority(tasks[5])
	var snap sched.Snapshot
	groups := b.AddGroups(&snap, entry)
	if len(snap.Queue) != 2 || snap.Queue[0].ID != "jarr_5" || snap.Queue[1].ID != "jarr_1" || snap.Queue[1].Count != 2 {
		t.Fatalf("queue %+v", snap.Queue)
	}
	if QueueSize(snap.Queue) != 3 || len(groups) != 1 {
		t.Fatalf("size %d, %d groups", QueueSize(snap.Queue), len(groups))
	}
	move(b, tx, tasks[1], api.StateScheduled)
	if next := b.Next(tasks[1], groups); next != tasks[2] {
		t.Fatalf("the group's second start went to %s", next.ID)
	}
	b.NotePending(groups, &sched.Result{Pending: []sched.Pending{{JobID: "jarr_1", Reason: sched.ReasonResources, Position: 3}}})
	var v api.Job
	b.Pending(tasks[7], &v)
	if v.PendingReason != sched.ReasonResources || v.QueuePosition != 3 {
		t.Fatalf("pending %q at %d", v.PendingReason, v.QueuePosition)
	}
	move(b, tx, tasks[2], api.StateRunning)
	move(b, tx, tasks[5], api.StateRunning)
	v = api.Job{}
	b.Pending(tasks[7], &v)
	if v.PendingReason != api.ReasonArrayThrottle {
		t.Fatalf("at the throttle: %q", v.PendingReason)
	}
	admit := b.Admit()
	if admit(tasks[7]) {
		t.Fatal("a task admitted past its throttle")
	}
}

// TestDoneArrayLeavesMemory: the batch that ends the last task writes
// the record marked done and every task's summary; once committed the
// array leaves the books and Jobs.Forget is told.
func TestDoneArrayLeavesMemory(t *testing.T) {
	f := &fakeJobs{}
	b := New(f, Config{})
	tx, tasks := submit(b, f, "jarr", "0-2")
	for i, j := range tasks[:2] {
		end := t0.Add(time.Duration(i+1) * time.Minute)
		j.FinishedAt = &end
		move(b, tx, j, api.StateCompleted)
	}
	tx = &fakeTx{now: t0.Add(time.Hour)}
	b.BeforeCommit(tx)
	if len(tx.batch.Arrays) != 0 {
		t.Fatal("an array with a queued task marked done")
	}
	b.Committed(tx)
	move(b, tx, tasks[2], api.StateFailed)
	b.BeforeCommit(tx)
	if len(tx.batch.Ended) != 3 || len(tx.batch.Arrays) != 1 || !tx.batch.Arrays[0].Finished.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("ended %d, arrays %+v", len(tx.batch.Ended), tx.batch.Arrays)
	}
	if !b.Knows("jarr") {
		t.Fatal("gone before the commit")
	}
	b.Committed(tx)
	if b.Knows("jarr") || b.Len() != 0 || len(f.forgot) != 1 || len(f.forgot[0].Tasks) != 3 {
		t.Fatalf("after the commit: known %v, forgot %+v", b.Knows("jarr"), f.forgot)
	}
}

// TestLoad: the tasks with no row are made from the record; the books
// are rebuilt from the jobs, with their counts and cursor.
func TestLoad(t *testing.T) {
	rec := store.ArrayRecord{Template: api.Job{User: "ana", Priority: api.PriorityNormal},
		Array: api.Array{ID: "jarr", User: "ana", Priority: api.PriorityNormal, Tasks: []int{0, 1, 2}, TaskCount: 3, SubmittedAt: t0}}
	done := api.Job{ID: "jarr_0", ArrayJobID: "jarr", ArrayTaskID: new(0), State: api.StateCompleted}
	st := &store.State{Arrays: []store.ArrayRecord{rec}, Jobs: []api.Job{done}}
	AddTasks(st)
	if len(st.Jobs) != 3 || st.Jobs[0].Events[0].Reason != api.ReasonSubmitted || st.Jobs[2].State != api.StateQueued {
		t.Fatalf("jobs %+v", st.Jobs)
	}
	f := &fakeJobs{}
	for i := range st.Jobs {
		f.jobs = append(f.jobs, &st.Jobs[i])
	}
	b := New(f, Config{})
	b.Load(st)
	r, _ := b.Live("jarr")
	if r.Counts.Queued != 2 || r.Counts.Completed != 1 {
		t.Fatalf("counts %+v", r.Counts)
	}
	var snap sched.Snapshot
	b.AddGroups(&snap, entry)
	if len(snap.Queue) != 1 || snap.Queue[0].ID != "jarr_1" || snap.Queue[0].Count != 2 {
		t.Fatalf("queue %+v", snap.Queue)
	}
	rows := []api.QueuedJob{{ID: "p", QueuePosition: 1}, {ID: "jarr_1", ArrayJobID: "jarr"}}
	if s := b.Positions(rows); len(s) != 1 || s[0].State != api.StateQueued || rows[1].QueuePosition != 2 {
		t.Fatalf("summaries %+v, rows %+v", s, rows)
	}
}

func TestTrim(t *testing.T) {
	q := api.QueueResponse{Arrays: []api.Array{{ID: "a"}}}
	for i := range 5 {
		q.QueuedJobs = append(q.QueuedJobs, api.QueuedJob{ID: "a_" + strconv.Itoa(i), ArrayJobID: "a"}, api.QueuedJob{ID: "p" + strconv.Itoa(i)})
	}
	got := Trim(q, 2)
	var ids []string
	for _, r := range got.QueuedJobs {
		ids = append(ids, r.ID)
	}
	if want := []string{"a_0", "p0", "a_1", "p1", "p2", "p3", "p4"}; !slices.Equal(ids, want) {
		t.Fatalf("trimmed to %v, want %v", ids, want)
	}
	if len(q.QueuedJobs) != 10 || q.QueuedJobs[2].ID != "a_1" {
		t.Fatal("Trim changed its input's rows")
	}
}

// TestCancel: canceling an array ends its queued tasks and stops its
// running ones not yet asked, in index order; one whose every task ended
// is a 409; one memory does not hold is not found.
func TestCancel(t *testing.T) {
	f := &fakeJobs{}
	b := New(f, Config{})
	tx, tasks := submit(b, f, "jarr", "0-4")
	move(b, tx, tasks[0], api.StateRunning)
	move(b, tx, tasks[1], api.StateRunning)
	tasks[1].CancelRequested = true
	move(b, tx, tasks[2], api.StateCompleted)
	steps, stopping, found, err := b.Cancel("jarr")
	if err != nil || !found || !stopping {
		t.Fatalf("found %v, stopping %v, err %v", found, stopping, err)
	}
	want := []CancelStep{{tasks[0], true}, {tasks[3], false}, {tasks[4], false}}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %+v, want %+v", steps, want)
	}
	if tasks[0].CancelRequested || tasks[3].State != api.StateQueued {
		t.Fatal("Cancel changed a task")
	}
	for _, j := range []*api.Job{tasks[0], tasks[1], tasks[3], tasks[4]} {
		move(b, tx, j, api.StateCanceled)
	}
	var e *api.Error
	if _, _, found, err := b.Cancel("jarr"); !found || !errors.As(err, &e) || e.Code != "wrong_state" {
		t.Fatalf("every task ended: found %v, err %v", found, err)
	}
	if _, _, found, err := b.Cancel("nope"); found || err != nil {
		t.Fatalf("no such array: found %v, err %v", found, err)
	}
}
