package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// startDeps runs an orchestrator over the store at path (fresh when
// empty) with one 8-GPU node, a fake clock and the given dependency
// timeout.
func startDeps(t *testing.T, path string, clk *clock, timeout time.Duration) *harness {
	t.Helper()
	return startDepsTick(t, path, clk, timeout, 10*time.Millisecond)
}

// startDepsTick is startDeps with the loop's tick (cycles run on every
// change, and on every tick).
func startDepsTick(t *testing.T, path string, clk *clock, timeout, tick time.Duration) *harness {
	t.Helper()
	return startConfig(t, path, Config{Nodes: []Node{simNode("n1", 8)}, Tick: tick, Now: clk.now, DependencyTimeout: timeout})
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)} }

// run plays a started job's process: started, then exited with code.
func (h *harness) run(id string, code int, at time.Time) {
	h.t.Helper()
	j, err := h.o.Job(id)
	if err != nil {
		h.t.Fatal(err)
	}
	h.o.Sink(exec.Update{JobID: id, Attempt: j.RetryCount, Kind: exec.Started, At: at})
	h.waitState(id, api.StateRunning)
	h.o.Sink(exec.Update{JobID: id, Attempt: j.RetryCount, Kind: exec.Exited, At: at, ExitCode: code})
}

// waitPending waits until the queued job's pending reason is want.
func (h *harness) waitPending(id, want string) api.Job {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := h.o.Changed()
		j, err := h.o.Job(id)
		if err != nil {
			h.t.Fatal(err)
		}
		if j.State == api.StateQueued && j.PendingReason == want {
			return j
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("job %s is %s, pending %q (%s); want pending %q", id, j.State, j.PendingReason, j.PendingMessage, want)
		}
	}
}

// addArray submits an array of n one-GPU tasks named name, depending on
// dependsOn, and returns its id.
func (h *harness) addArray(n int, name, dependsOn string) string {
	h.t.Helper()
	j, _, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "task", Name: name, User: "ana",
		GPUCount: gpus(1), Array: fmt.Sprintf("0-%d", n-1), DependsOn: dependsOn}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return j.ArrayJobID
}

// TestDependencyPipeline: a failed first stage runs the afternotok branch;
// the afterok branch is held with dependency_never_satisfied naming the
// culprit, canceled with that reason once the timeout has passed on the
// orchestrator's clock, and so is the stage after it.
func TestDependencyPipeline(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, time.Hour)
	train := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(8)})
	eval := h.submit(api.SubmitRequest{Command: "eval", GPUCount: gpus(1), DependsOn: "afterok:" + train.ID})
	report := h.submit(api.SubmitRequest{Command: "report", GPUCount: gpus(1), DependsOn: "afterany:" + eval.ID})
	rescue := h.submit(api.SubmitRequest{Command: "rescue", GPUCount: gpus(1), DependsOn: "afternotok:" + train.ID})
	if eval.DependsOn != "afterok:"+train.ID {
		t.Fatalf("depends_on = %q", eval.DependsOn)
	}
	if eval.PendingReason != api.ReasonDependency || !strings.Contains(eval.PendingMessage, "waits for job "+train.ID+" (afterok) to complete") {
		t.Fatalf("submitted eval pending %q: %q", eval.PendingReason, eval.PendingMessage)
	}
	if task := h.nextStart(); task.JobID != train.ID {
		t.Fatalf("started %s, want train", task.JobID)
	}
	h.noStart()
	j := h.waitPending(eval.ID, api.ReasonDependency)
	if want := "waits for job " + train.ID + " (afterok) to complete; it is allocating"; j.PendingMessage != want {
		t.Fatalf("eval pending message %q, want %q", j.PendingMessage, want)
	}
	h.run(train.ID, 3, clk.now())
	h.waitState(train.ID, api.StateFailed)
	if task := h.nextStart(); task.JobID != rescue.ID {
		t.Fatalf("started %s, want the afternotok branch", task.JobID)
	}
	j = h.waitPending(eval.ID, api.ReasonDependencyNeverSatisfied)
	if !strings.Contains(j.PendingMessage, "afterok on job "+train.ID+" can never be met: it failed") {
		t.Fatalf("never-satisfied message %q", j.PendingMessage)
	}
	h.waitPending(report.ID, api.ReasonDependency) // afterany: eval may still end

	clk.add(59 * time.Minute)
	h.waitCycle()
	if j, _ := h.o.Job(eval.ID); j.State != api.StateQueued {
		t.Fatalf("eval %s before the timeout", j.State)
	}
	clk.add(time.Minute)
	j = h.waitState(eval.ID, api.StateCanceled)
	last := j.Events[len(j.Events)-1]
	if last.Reason != api.ReasonDependencyNeverSatisfied || !strings.Contains(last.Message, train.ID) || j.FinishedAt == nil {
		t.Fatalf("canceled event %+v", last)
	}
	// eval ended (canceled): afterany lets report run.
	if task := h.nextStart(); task.JobID != report.ID {
		t.Fatalf("started %s, want report", task.JobID)
	}
}

// TestDependencyCascadeAtOnce: with a negative timeout (at once) a chain
// of afterok jobs behind a failed one is canceled in one go.
func TestDependencyCascadeAtOnce(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, -1)
	first := h.submit(api.SubmitRequest{Command: "first", GPUCount: gpus(8)})
	prev := first.ID
	var chain []string
	for i := range 4 {
		j := h.submit(api.SubmitRequest{Command: fmt.Sprint("stage", i), GPUCount: gpus(1), DependsOn: "afterok:" + prev})
		chain, prev = append(chain, j.ID), j.ID
	}
	h.nextStart()
	h.run(first.ID, 1, clk.now())
	for _, id := range chain {
		if j := h.waitState(id, api.StateCanceled); j.Reason != api.ReasonDependencyNeverSatisfied {
			t.Fatalf("job %s canceled with reason %q", id, j.Reason)
		}
	}
}

// TestDependencyWaitsAgainAfterRequeue: a dependency met once is not
// remembered; a predecessor that goes back to the queue (its attempt
// lost) holds a dependent that has not started again.
func TestDependencyWaitsAgainAfterRequeue(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	first := h.submit(api.SubmitRequest{Command: "first", GPUCount: gpus(8), MaxRetries: 1})
	next := h.submit(api.SubmitRequest{Command: "next", GPUCount: gpus(1), DependsOn: "after:" + first.ID})
	h.nextStart()
	h.waitPending(next.ID, api.ReasonDependency)
	h.o.Sink(exec.Update{JobID: first.ID, Kind: exec.Started, At: clk.now()})
	h.waitState(first.ID, api.StateRunning)
	// Started: "after" is met; next waits only for GPUs now.
	h.waitPending(next.ID, "insufficient_gpus")
	h.o.Sink(exec.Update{JobID: first.ID, Kind: exec.Exited, At: clk.now(), Lost: api.ReasonLost, Err: errors.New("agent lost it")})
	h.waitState(first.ID, api.StateQueued)
	j := h.waitPending(next.ID, api.ReasonDependency)
	if want := "waits for job " + first.ID + " (after) to start; it is queued"; j.PendingMessage != want {
		t.Fatalf("message %q, want %q", j.PendingMessage, want)
	}
	h.noStart()
}

// TestDependencyAnyOfAndSingleton: '?' runs the job when one term is met;
// singleton runs one job of a user and name at a time.
func TestDependencyAnyOfAndSingleton(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	a := h.submit(api.SubmitRequest{Command: "a", GPUCount: gpus(4)})
	b := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(4)})
	either := h.submit(api.SubmitRequest{Command: "either", GPUCount: gpus(0), DependsOn: "afterok:" + a.ID + "?afterok:" + b.ID})
	h.nextStart()
	h.nextStart()
	h.waitPending(either.ID, api.ReasonDependency)
	h.run(b.ID, 0, clk.now())
	if task := h.nextStart(); task.JobID != either.ID {
		t.Fatalf("started %s, want the any-of job", task.JobID)
	}

	s1 := h.submit(api.SubmitRequest{Command: "s1", Name: "sync", User: "ana", GPUCount: gpus(0), DependsOn: "singleton"})
	s2 := h.submit(api.SubmitRequest{Command: "s2", Name: "sync", User: "ana", GPUCount: gpus(0), DependsOn: "singleton"})
	other := h.submit(api.SubmitRequest{Command: "s3", Name: "sync", User: "bob", GPUCount: gpus(0), DependsOn: "singleton"})
	started := map[string]bool{h.nextStart().JobID: true, h.nextStart().JobID: true}
	if !started[s1.ID] || !started[other.ID] {
		t.Fatalf("started %v, want s1 and bob's job", started)
	}
	h.noStart()
	j := h.waitPending(s2.ID, api.ReasonDependency)
	if !strings.Contains(j.PendingMessage, "waits for job "+s1.ID+" of the same user and name (singleton)") {
		t.Fatalf("singleton message %q", j.PendingMessage)
	}
	h.run(s1.ID, 0, clk.now())
	if task := h.nextStart(); task.JobID != s2.ID {
		t.Fatalf("started %s, want s2 after s1 ended", task.JobID)
	}
}

// TestDependencyArrays: an array id stands for all its tasks; aftercorr
// lets task i go after task i of the other array.
func TestDependencyArrays(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	h.o.SetScheduling(context.Background(), false)
	prep := h.addArray(2, "prep", "")
	train := h.addArray(2, "train", "aftercorr:"+prep)
	all := h.submit(api.SubmitRequest{Command: "all", GPUCount: gpus(0), DependsOn: "afterok:" + prep[:len(prep)-1]}) // a prefix of the array's id
	if all.DependsOn != "afterok:"+prep {
		t.Fatalf("depends_on = %q, want the array's full id", all.DependsOn)
	}
	h.o.SetScheduling(context.Background(), true)
	started := map[string]bool{h.nextStart().JobID: true, h.nextStart().JobID: true}
	h.noStart()
	if !started[prep+"_0"] || !started[prep+"_1"] {
		t.Fatalf("started %v, want array a's tasks", started)
	}
	h.run(prep+"_1", 0, clk.now())
	if task := h.nextStart(); task.JobID != train+"_1" {
		t.Fatalf("started %s, want %s_1 (aftercorr)", task.JobID, train)
	}
	h.noStart()
	if j := h.waitPending(all.ID, api.ReasonDependency); !strings.Contains(j.PendingMessage, prep+"_0") {
		t.Fatalf("all waits for %q, want %s_0", j.PendingMessage, prep)
	}
	h.run(prep+"_0", 0, clk.now())
	started = map[string]bool{h.nextStart().JobID: true, h.nextStart().JobID: true}
	if !started[train+"_0"] || !started[all.ID] {
		t.Fatalf("started %v, want %s_0 and the job after the whole array", started, train)
	}
}

// TestDependencyRefused: bad expressions are refused with a 422 naming
// depends_on, and change nothing; so are self-references and cycles made
// through PATCH /queue/{id}/dependency, directly or through an array.
func TestDependencyRefused(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	a := h.submit(api.SubmitRequest{Command: "a"})
	h.submit(api.SubmitRequest{Command: "twin1"})
	h.submit(api.SubmitRequest{Command: "twin2"})
	arr := h.addArray(2, "x", "afterok:"+a.ID)
	b := h.submit(api.SubmitRequest{Command: "b", DependsOn: "afterok:" + a.ID})
	before := len(h.o.Jobs(JobFilter{}))

	cases := map[string]struct{ req api.SubmitRequest }{
		"syntax":             {api.SubmitRequest{Command: "x", DependsOn: "afterok"}},
		"mixed":              {api.SubmitRequest{Command: "x", DependsOn: "afterok:" + a.ID + ",afterany:" + b.ID + "?after:" + a.ID}},
		"unknown id":         {api.SubmitRequest{Command: "x", DependsOn: "afterok:jnosuchjob"}},
		"short prefix":       {api.SubmitRequest{Command: "x", DependsOn: "afterok:" + a.ID[:4]}},
		"ambiguous prefix":   {api.SubmitRequest{Command: "x", DependsOn: "afterok:" + a.ID[:6]}}, // a, twin1, twin2 and b share it (their first 5 time characters)
		"aftercorr non-arr":  {api.SubmitRequest{Command: "x", DependsOn: "aftercorr:" + arr}},
		"aftercorr on job":   {api.SubmitRequest{Command: "x", Array: "0-1", DependsOn: "aftercorr:" + a.ID}},
		"singleton no name":  {api.SubmitRequest{Command: "x", DependsOn: "singleton"}},
		"unknown in any-of":  {api.SubmitRequest{Command: "x", DependsOn: "afterok:" + a.ID + "?afterok:jmissing1"}},
		"one unknown of two": {api.SubmitRequest{Command: "x", DependsOn: "afterok:" + a.ID + ":jmissing1"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := h.o.Submit(ctx, c.req, "")
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 422 || ae.Field != "depends_on" {
				t.Fatalf("submit %q: %v, want a 422 naming depends_on", c.req.DependsOn, err)
			}
		})
	}
	if after := len(h.o.Jobs(JobFilter{})); after != before {
		t.Fatalf("%d jobs after refusals, want %d", after, before)
	}

	updates := map[string]struct{ id, expr, msg string }{
		"self":           {a.ID, "afterok:" + a.ID, "refers to the job itself"},
		"own array":      {arr + "_0", "afterany:" + arr, "refers to the job itself"},
		"cycle":          {a.ID, "afterok:" + b.ID, "would make a cycle: " + a.ID + " -> " + b.ID + " -> " + a.ID},
		"cycle by array": {a.ID, "after:" + arr, "would make a cycle: " + a.ID + " -> " + arr + " -> " + arr + "_0 -> " + a.ID},
	}
	for name, c := range updates {
		t.Run(name, func(t *testing.T) {
			_, err := h.o.FeatureOps().Deps.Set(ctx, c.id, c.expr)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 422 || ae.Field != "depends_on" || !strings.Contains(ae.Message, c.msg) {
				t.Fatalf("SetDependency(%s, %q): %v, want a 422 naming depends_on saying %q", c.id, c.expr, err, c.msg)
			}
		})
	}
	if j, _ := h.o.Job(a.ID); j.DependsOn != "" || len(j.Events) != 1 {
		t.Fatalf("refused updates changed the job: %+v", j)
	}
	// A fine update is stored (no event: the state stays queued);
	// removing it lets the job run.
	j, err := h.o.FeatureOps().Deps.Set(ctx, b.ID, "afterany:"+a.ID)
	if err != nil || j.DependsOn != "afterany:"+a.ID || len(j.Events) != 1 {
		t.Fatalf("update: %+v, %v", j, err)
	}
	if _, err := h.o.FeatureOps().Deps.Set(ctx, b.ID, ""); err != nil {
		t.Fatal(err)
	}
	h.o.SetScheduling(ctx, true)
	h.waitState(b.ID, api.StateAllocating)
	if _, err := h.o.FeatureOps().Deps.Set(ctx, b.ID, "afterok:"+a.ID); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("update of a started job: %v, want 409", err)
	}
}

// TestDependencySurvivesRestart: depends_on is stored resolved, and a
// restarted orchestrator holds the job as before.
func TestDependencySurvivesRestart(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	first := h.submit(api.SubmitRequest{Command: "first", GPUCount: gpus(8), MaxRetries: 1})
	next := h.submit(api.SubmitRequest{Command: "next", GPUCount: gpus(1), DependsOn: "afterok:" + first.ID[:8]})
	h.nextStart()
	h.stop()
	h.stop = nil
	h2 := startDeps(t, h.path, clk, 0)
	j := h2.waitPending(next.ID, api.ReasonDependency)
	if j.DependsOn != "afterok:"+first.ID {
		t.Fatalf("depends_on after restart = %q", j.DependsOn)
	}
	task := h2.nextStart() // first, requeued after the restart (attempt lost), runs again
	if task.JobID != first.ID {
		t.Fatalf("started %s, want first", task.JobID)
	}
	h2.run(first.ID, 0, clk.now())
	if task := h2.nextStart(); task.JobID != next.ID {
		t.Fatalf("started %s, want next", task.JobID)
	}
}

// TestDependencyQueueOrder: GET /queue lists the jobs held by their
// dependencies after the others, whatever their priority, numbered on.
func TestDependencyQueueOrder(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	first := h.submit(api.SubmitRequest{Command: "first", GPUCount: gpus(8)})
	h.nextStart()
	held := h.submit(api.SubmitRequest{Command: "held", GPUCount: gpus(1), Priority: api.RawValue(`"critical"`), DependsOn: "afterok:" + first.ID})
	low := h.submit(api.SubmitRequest{Command: "low", GPUCount: gpus(1), Priority: api.RawValue(`"low"`)})
	for _, fresh := range []bool{true, false} { // as soon as submitted, and after a cycle
		if !fresh {
			h.waitCycle()
		}
		q := h.o.Queue().QueuedJobs
		if len(q) != 2 || q[0].ID != low.ID || q[0].QueuePosition != 1 || q[1].ID != held.ID || q[1].QueuePosition != 2 || q[1].PendingReason != api.ReasonDependency {
			t.Fatalf("queue (fresh %v) = %+v", fresh, q)
		}
	}
}

// TestDependencyCascadeRunsFollower: when a job is canceled for a
// dependency that can never be met, a job afternotok on it goes in the
// same cycle (no tick needed: the loop's tick is an hour here).
func TestDependencyCascadeRunsFollower(t *testing.T) {
	clk := newClock()
	h := startDepsTick(t, "", clk, -1, time.Hour)
	first := h.submit(api.SubmitRequest{Command: "first", GPUCount: gpus(8)})
	second := h.submit(api.SubmitRequest{Command: "second", GPUCount: gpus(1), DependsOn: "afterok:" + first.ID})
	cleanup := h.submit(api.SubmitRequest{Command: "cleanup", GPUCount: gpus(1), DependsOn: "afternotok:" + second.ID})
	h.nextStart()
	h.run(first.ID, 1, clk.now())
	if task := h.nextStart(); task.JobID != cleanup.ID {
		t.Fatalf("started %s, want the afternotok follower of the canceled job", task.JobID)
	}
	if j := h.waitState(second.ID, api.StateCanceled); j.Reason != api.ReasonDependencyNeverSatisfied {
		t.Fatalf("second canceled with reason %q", j.Reason)
	}
}
