package orchestrator

import (
	"context"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// restart stops h's orchestrator (as kill -9 would leave the store: what
// was committed) and starts another over the same store.
func (h *harness) restart() *harness {
	h.t.Helper()
	h.stop()
	h.stop = nil
	return start(h.t, h.path, nil)
}

// TestNumbers: jobs get numbers 1, 2, ...; an array one number, its tasks
// carrying it (N_I); the queue and the array's view show them; after a
// restart numbers go on from the last, never again giving one.
func TestNumbers(t *testing.T) {
	h := start(t, "", nil)
	h.o.SetScheduling(context.Background(), false) // jobs stay queued (and off survives restarts)
	big := gpus(1)
	j1 := h.submit(api.SubmitRequest{Command: "a", User: "ana", GPUCount: big})
	j2 := h.submit(api.SubmitRequest{Command: "b", User: "ana", GPUCount: big})
	first, _, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "c", User: "ana", GPUCount: big, Array: "0-2"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if j1.Number != 1 || j2.Number != 2 || first.Number != 3 || first.ShortID() != "3_0" {
		t.Fatalf("numbers %d, %d, %d (%s); want 1, 2, 3 (3_0)", j1.Number, j2.Number, first.Number, first.ShortID())
	}
	if a, err := h.o.FeatureOps().Arrays.Get(first.ArrayJobID); err != nil || a.Number != 3 {
		t.Fatalf("Array = %+v, %v; want number 3", a, err)
	}
	got := map[string]string{}
	for _, q := range h.o.Queue().QueuedJobs {
		got[q.ID] = api.ShortID(q.Number, q.ArrayTaskID)
	}
	if got[j1.ID] != "1" || got[j2.ID] != "2" || got[first.ArrayJobID+"_2"] != "3_2" {
		t.Fatalf("queue's numbers = %v", got)
	}

	h = h.restart()
	if j, err := h.o.Job(first.ArrayJobID + "_1"); err != nil || j.ShortID() != "3_1" {
		t.Fatalf("task 1 after the restart: %s, %v; want 3_1", j.ShortID(), err)
	}
	if j := h.submit(api.SubmitRequest{Command: "d", User: "ana", GPUCount: big}); j.Number != 4 {
		t.Fatalf("after a restart: number %d; want 4", j.Number)
	}
	h = h.restart()
	if j := h.submit(api.SubmitRequest{Command: "e", User: "ana", GPUCount: big}); j.Number != 5 {
		t.Fatalf("after a second restart: number %d; want 5", j.Number)
	}
}

// TestNumberTakenElsewhere: a number the store already holds (a leader
// that raced a take-over gave it) fails the submission's commit: the job
// is refused, never numbered twice; the next submission gets the next.
func TestNumberTakenElsewhere(t *testing.T) {
	h := start(t, "", nil)
	h.o.SetScheduling(context.Background(), false) // jobs stay queued (and off survives restarts)
	h.submit(api.SubmitRequest{Command: "a", User: "ana", GPUCount: gpus(1)})
	if err := h.o.cfg.Store.Commit(context.Background(), &store.Batch{Numbers: []store.NumberRow{{Number: 2, ID: "jother"}}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "b", User: "ana", GPUCount: gpus(1)}, "")
	if err == nil {
		t.Fatal("a submission given a number the store holds: accepted")
	}
	if id, found, err := h.o.cfg.Store.NumberID(context.Background(), 2); err != nil || !found || id != "jother" {
		t.Fatalf("number 2 = %q, %v, %v; want jother's still", id, found, err)
	}
	if j := h.submit(api.SubmitRequest{Command: "c", User: "ana", GPUCount: gpus(1)}); j.Number != 3 {
		t.Fatalf("the next submission: number %d; want 3", j.Number)
	}
}

// TestResolveRef: numbers, tasks (N_I and PREFIX_I), ids and names
// resolve; a name resolves only among the caller's own jobs, and one
// that several of them have is a 409 listing their numbers.
func TestResolveRef(t *testing.T) {
	h := start(t, "", nil)
	h.o.SetScheduling(context.Background(), false) // jobs stay queued (and off survives restarts)
	big := gpus(1)
	sub := func(user, name string) api.Job {
		return h.submit(api.SubmitRequest{Command: "x", User: user, Name: name, GPUCount: big})
	}
	eval := sub("ana", "eval")                      // 1
	sub("bo", "eval")                               // 2
	sub("ana", "twice")                             // 3
	sub("ana", "twice")                             // 4
	arr, _, err := h.o.Submit(context.Background(), // 5
		api.SubmitRequest{Command: "x", User: "ana", Name: "sweep", GPUCount: big, Array: "0-3"}, "")
	if err != nil {
		t.Fatal(err)
	}
	aid := arr.ArrayJobID
	only := sub("bo", "solo") // 6
	for _, tc := range []struct {
		ref, user string
		want      string
		array     bool
		status    int
		msg       string
	}{
		{ref: "1", user: "ana", want: eval.ID},
		{ref: "1", user: "bo", want: eval.ID}, // numbers name anyone's job; the routes check who may act
		{ref: "5", want: aid, array: true},
		{ref: "5_2", want: aid + "_2"},
		{ref: aid + "_3", want: aid + "_3"},
		{ref: aid[:8] + "_1", want: aid + "_1"}, // PREFIX_I, a prefix the other jobs' ids share too
		{ref: eval.ID, want: eval.ID},
		{ref: "eval", user: "ana", want: eval.ID},
		{ref: "sweep", user: "ana", want: aid, array: true},
		{ref: "twice", user: "ana", status: 409, msg: `"twice" names 2 of your jobs: 4, 3`},
		{ref: "solo", user: "ana", status: 404}, // bo's
		{ref: "solo", user: "bo", want: only.ID},
		{ref: "eval", status: 404}, // no caller: no names
		{ref: "99", status: 404, msg: "no job number 99"},
		{ref: "5_9", status: 404, msg: "has no task 9"},
		{ref: "1_0", status: 404},
		{ref: "0", status: 404},
	} {
		got, array, err := h.o.FeatureOps().Refs.Ref(tc.ref, tc.user)
		if tc.status == 0 {
			if err != nil || got != tc.want || array != tc.array {
				t.Errorf("%q as %q: %q, %v, %v; want %q, %v", tc.ref, tc.user, got, array, err, tc.want, tc.array)
			}
			continue
		}
		e := api.AsError(err)
		if err == nil || e.Status != tc.status || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%q as %q: %q, %v; want %d saying %q", tc.ref, tc.user, got, err, tc.status, tc.msg)
		}
		if tc.status == 409 && e.Code != "ambiguous_id" {
			t.Errorf("%q: code %s; want ambiguous_id", tc.ref, e.Code)
		}
	}
	// A job route given an array, an array route given a job.
	if _, err := h.o.FeatureOps().Refs.JobRef("5", "ana"); api.AsError(err).Code != "is_array" {
		t.Errorf("ResolveJobRef(5) = %v; want is_array", err)
	}
	if _, err := h.o.FeatureOps().Refs.ArrayRef("1", "ana"); api.AsError(err).Status != 404 {
		t.Errorf("ResolveArrayRef(1) = %v; want 404", err)
	}
	// Dependencies take numbers too.
	dep := h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: big, DependsOn: "afterok:1:5_1"})
	if dep.DependsOn != "afterok:"+eval.ID+":"+aid+"_1" {
		t.Errorf("depends_on afterok:1:5_1 = %q", dep.DependsOn)
	}

	// An ended job that left memory is found by name in the store.
	if _, _, err := h.o.Cancel(context.Background(), eval.ID, 0); err != nil {
		t.Fatal(err)
	}
	h = h.restart()
	if got, _, err := h.o.FeatureOps().Refs.Ref("eval", "ana"); err != nil || got != eval.ID {
		t.Errorf("eval after it ended and the server restarted: %q, %v", got, err)
	}
}
