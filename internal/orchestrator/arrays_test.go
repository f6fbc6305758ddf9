package orchestrator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/sched"
)

// finish reports that a started task ran and exited 0.
func (h *harness) finish(t exec.Task) {
	now := time.Now()
	h.o.Sink(exec.Update{JobID: t.JobID, Attempt: t.Attempt, Kind: exec.Started, At: now, PID: 1})
	h.o.Sink(exec.Update{JobID: t.JobID, Attempt: t.Attempt, Kind: exec.Exited, At: now})
	h.waitState(t.JobID, api.StateCompleted)
}

// takeStarts takes the next n starts the executor is given, then checks
// that a cycle later there is no other.
func (h *harness) takeStarts(n int) []exec.Task {
	h.t.Helper()
	out := make([]exec.Task, 0, n)
	for range n {
		out = append(out, h.nextStart())
	}
	h.waitCycle()
	select {
	case t := <-h.ex.starts:
		h.t.Fatalf("%s started too: want %d starts, %v", t.JobID, n, out)
	default:
	}
	return out
}

// TestArrayThrottleAndEnv: an array 0-9%3 of one-GPU tasks on 8 GPUs runs
// 3 tasks at once, in index order, each with its CORRAL_ARRAY_* env; the
// others wait with reason array_throttle. A task that ends lets the next
// start; raising the throttle starts more at once; it survives a restart.
func TestArrayThrottleAndEnv(t *testing.T) {
	h := start(t, "", nil)
	first := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(1), Array: "0-9%3"})
	aid := first.ArrayJobID
	if aid == "" || first.ID != aid+"_0" || first.ArrayTaskID == nil || *first.ArrayTaskID != 0 {
		t.Fatalf("first task = %s (array %q, index %v)", first.ID, aid, first.ArrayTaskID)
	}
	starts := h.takeStarts(3) // the throttle
	for i, st := range starts {
		want := map[string]string{"CORRAL_ARRAY_JOB_ID": aid, "CORRAL_ARRAY_TASK_ID": string(rune('0' + i)),
			"CORRAL_ARRAY_TASK_COUNT": "10", "CORRAL_ARRAY_TASK_MIN": "0", "CORRAL_ARRAY_TASK_MAX": "9"}
		if st.JobID != aid+"_"+want["CORRAL_ARRAY_TASK_ID"] {
			t.Fatalf("start %d is %s, want task %s (index order)", i, st.JobID, want["CORRAL_ARRAY_TASK_ID"])
		}
		for k, v := range want {
			if st.Env[k] != v {
				t.Fatalf("task %s: %s=%q, want %q", st.JobID, k, st.Env[k], v)
			}
		}
	}
	j, err := h.o.Job(aid + "_5")
	if err != nil || j.State != api.StateQueued || j.PendingReason != api.ReasonArrayThrottle {
		t.Fatalf("task 5: %v %s %q, want queued with reason array_throttle", err, j.State, j.PendingReason)
	}
	a, err := h.o.FeatureOps().Arrays.Get(aid)
	if err != nil || a.Counts.Queued != 7 || a.Counts.Active() != 3 || a.TaskCount != 10 || a.Throttle != 3 || len(a.Tasks) != 10 {
		t.Fatalf("array = %+v, %v", a, err)
	}

	h.finish(starts[0])
	if more := h.takeStarts(1); more[0].JobID != aid+"_3" {
		t.Fatalf("after one task ended, started %s; want task 3", more[0].JobID)
	}
	if _, err := h.o.FeatureOps().Arrays.SetThrottle(context.Background(), aid, 6); err != nil {
		t.Fatal(err)
	}
	h.takeStarts(3) // throttle 3 -> 6
	if _, err := h.o.FeatureOps().Arrays.SetThrottle(context.Background(), aid, -1); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("throttle -1: %v, want 422", err)
	}

	// The record, throttle included, survives a restart.
	h.stop()
	h.stop = nil
	h2 := start(t, h.path, nil)
	a, err = h2.o.FeatureOps().Arrays.Get(aid[:10])
	if err != nil || a.ID != aid || a.Throttle != 6 || a.TaskCount != 10 || a.Counts.Completed != 1 || a.Counts.Total() != 10 {
		t.Fatalf("after a restart: %+v, %v", a, err)
	}
	// A task that never left the queue has no row of its own: it is made
	// from the record, with its submission event; one that ran has it too.
	for id, want := range map[string][]api.State{aid + "_9": {api.StateQueued}, aid + "_0": {api.StateQueued, api.StateScheduled, api.StateAllocating, api.StateRunning, api.StateCompleted}} {
		j, err := h2.o.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		var got []api.State
		for _, e := range j.Events {
			got = append(got, e.To)
		}
		// (Task 9 may have started since: the new loop runs a cycle.)
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) || j.Events[0].Reason != api.ReasonSubmitted || j.Command != "train" || j.GPUCount != 1 {
			t.Fatalf("task %s after a restart: events %v, command %q, %d GPUs", id, got, j.Command, j.GPUCount)
		}
	}
	// The 6 that were active died with the server (no retries): the 3
	// tasks still queued start, in index order.
	if starts := h2.takeStarts(3); starts[0].JobID != aid+"_7" || starts[0].Env["CORRAL_ARRAY_TASK_COUNT"] != "10" {
		t.Fatalf("after a restart: %v; want tasks 7, 8 and 9", starts)
	}
}

// TestArraySubmitRules: bad expressions are 422s naming array; the
// queue limits count every task; an idempotency key replays the whole
// array; an array id is not a job id, but a task id is.
func TestArraySubmitRules(t *testing.T) {
	h := startLimited(t, Limits{MaxQueuedPerUser: 12, MaxArraySize: 10})
	for _, bad := range []string{"5-1", "0-9:0", "1,1", "-2", "0-10", "x"} {
		_, _, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "x", Array: bad, GPUCount: gpus(0)}, "")
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 422 || e.Field != "array" {
			t.Errorf("array %q: %v, want a 422 naming array", bad, err)
		}
	}
	h.o.SetScheduling(context.Background(), false) // keep everything queued
	j, replayed, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "x", Array: "0-7", User: "ana"}, "k1")
	if err != nil || replayed {
		t.Fatal(err, replayed)
	}
	again, replayed, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "x", Array: "0-7", User: "ana"}, "k1")
	if err != nil || !replayed || again.ID != j.ID {
		t.Fatalf("replay: %s replayed=%v %v; want %s replayed", again.ID, replayed, err, j.ID)
	}
	if n := len(h.o.Jobs(JobFilter{User: "ana"})); n != 8 {
		t.Fatalf("ana has %d jobs after a replay, want 8", n)
	}
	// 8 queued + 5 > 12.
	_, _, err = h.o.Submit(context.Background(), api.SubmitRequest{Command: "x", Array: "0-4", User: "ana"}, "")
	var e *api.Error
	if !errors.As(err, &e) || e.Status != 429 || e.Code != "user_queue_full" {
		t.Fatalf("8 queued + 5 tasks over a limit of 12: %v, want 429 user_queue_full", err)
	}
	if _, _, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "x", Array: "0-3", User: "ana"}, ""); err != nil {
		t.Fatalf("8 + 4 tasks within a limit of 12: %v", err)
	}

	aid := j.ArrayJobID
	if _, err := h.o.FeatureOps().Refs.JobID(aid); err == nil || !strings.Contains(err.Error(), "job array") {
		t.Fatalf("ResolveJobID(array id) = %v; want an error saying it is an array", err)
	}
	if id, err := h.o.FeatureOps().Refs.JobID(aid + "_3"); err != nil || id != aid+"_3" {
		t.Fatalf("ResolveJobID(task) = %q, %v", id, err)
	}
	if id, err := h.o.FeatureOps().Refs.ArrayID(aid[:len(aid)-2]); err != nil || id != aid {
		t.Fatalf("ResolveArrayID(prefix) = %q, %v", id, err)
	}
}

// TestCancelArray cancels every unfinished task in one call: queued ones
// at once, running ones through the executor; ended ones stay as they are.
func TestCancelArray(t *testing.T) {
	h := start(t, "", nil)
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), Array: "0-19%2"})
	starts := h.takeStarts(2)
	h.finish(starts[0])
	h.takeStarts(1)
	a, stopping, err := h.o.FeatureOps().Arrays.Cancel(context.Background(), j.ArrayJobID, 0)
	if err != nil || !stopping {
		t.Fatalf("CancelArray: %v stopping=%v", err, stopping)
	}
	if a.Counts.Canceled != 17 || a.Counts.Completed != 1 || a.Counts.Queued != 0 {
		t.Fatalf("counts after cancel: %+v", a.Counts)
	}
	for range 2 {
		select {
		case <-h.ex.stops:
		case <-time.After(5 * time.Second):
			t.Fatal("a running task was not stopped")
		}
	}
	if _, _, err := h.o.FeatureOps().Arrays.Cancel(context.Background(), "nosuch", 0); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown array: %v", err)
	}
}

// TestArrayTasksWaitTogether: an array's waiting tasks, handed to the
// core as one group, each show the group's reason and place in GET
// /queue, which also carries the array's summary.
func TestArrayTasksWaitTogether(t *testing.T) {
	h := start(t, "", nil)
	blocker := h.submit(api.SubmitRequest{Command: "big", GPUCount: gpus(8)})
	if st := h.nextStart(); st.JobID != blocker.ID {
		t.Fatalf("started %s, want the blocker", st.JobID)
	}
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), Array: "0-4"})
	h.waitCycle()
	q := h.o.Queue()
	if len(q.QueuedJobs) != 5 || len(q.Arrays) != 1 || q.Arrays[0].ID != j.ArrayJobID || q.Arrays[0].Counts.Queued != 5 {
		t.Fatalf("queue: %d rows, arrays %+v", len(q.QueuedJobs), q.Arrays)
	}
	for _, row := range q.QueuedJobs {
		if row.ArrayJobID != j.ArrayJobID || row.QueuePosition != 1 || row.PendingReason != sched.ReasonResources {
			t.Fatalf("row %s: array %q position %d reason %q; want position 1, reason %s", row.ID, row.ArrayJobID, row.QueuePosition, row.PendingReason, sched.ReasonResources)
		}
	}
	task, _ := h.o.Job(j.ArrayJobID + "_3")
	if task.PendingReason != sched.ReasonResources || task.PendingMessage == "" {
		t.Fatalf("task 3: reason %q message %q", task.PendingReason, task.PendingMessage)
	}
}

// TestArrayWithDependenciesGoesOneByOne: an array whose tasks wait on
// dependencies is not grouped: its tasks enter the snapshot one by one
// (where a dependency filter holds plain jobs), still within the throttle.
func TestArrayWithDependenciesGoesOneByOne(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), Array: "0-9%3"})
	v, err := h.o.do(ctx, func(tx *txn) (any, error) {
		_, tmpl := h.o.arr.Live(j.ArrayJobID)
		tmpl.DependsOn = "afterok:j1" // as the dependencies' submit would set it
		tasks, _ := h.o.arr.Tasks(j.ArrayJobID)
		for _, t := range tasks {
			h.o.jobs.SetQueued(t, false)
			t.DependsOn = tmpl.DependsOn
			h.o.jobs.SetQueued(t, true)
		}
		snap, groups := h.o.snapshotGroups(time.Now(), h.o.jobs.QueueOrder(), nil)
		return []any{snap, groups}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, groups := v.([]any)[0].(sched.Snapshot), v.([]any)[1].(arrays.Groups)
	if len(groups) != 0 || len(snap.Queue) != 3 {
		t.Fatalf("%d groups, %d queue entries; want no group and the throttle's 3 tasks", len(groups), len(snap.Queue))
	}
	for _, q := range snap.Queue {
		if q.Count > 1 || !strings.HasPrefix(q.ID, j.ArrayJobID+"_") {
			t.Fatalf("entry %s (count %d)", q.ID, q.Count)
		}
	}
}
