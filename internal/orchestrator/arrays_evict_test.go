package orchestrator

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// inMemory reports whether the array and any of its tasks are in memory.
func (h *harness) inMemory(aid string) (array bool, tasks int) {
	h.o.mu.RLock()
	defer h.o.mu.RUnlock()
	array = h.o.arr.Knows(aid)
	for j := range h.o.jobs.Unordered() {
		if strings.HasPrefix(j.ID, aid+"_") {
			tasks++
		}
	}
	return array, tasks
}

// same fails unless a and b are the same JSON.
func same(t *testing.T, what string, a, b any) {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	if string(x) != string(y) {
		t.Fatalf("%s:\n got %s\nwant %s", what, x, y)
	}
}

// allPages reads GET /jobs with f a page of limit at a time.
func (h *harness) allPages(f JobFilter, limit int) []string {
	h.t.Helper()
	var got []string
	f.Limit = limit
	for range 100 {
		jobs, next, err := h.o.JobPage(context.Background(), f)
		if err != nil {
			h.t.Fatal(err)
		}
		got = append(got, jobIDs(jobs)...)
		if next == "" {
			return got
		}
		f.Cursor = next
	}
	h.t.Fatal("more than 100 pages")
	return nil
}

// An array whose tasks have all ended leaves memory, tasks and books,
// at the commit that ends the last one; its views answer as before, from
// the store after a restart (which loads nothing of it, but all of an
// array not done); GET /jobs lists every task once, in order, on any page
// size; the counts of ended jobs count each task once.
func TestDoneArrayLeavesMemory(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	const n = 6
	req := api.SubmitRequest{Command: "sweep", GPUCount: gpus(1), User: "ana", Array: "0-" + strconv.Itoa(n-1) + "%8"}
	first, _, err := h.o.Submit(ctx, req, "sweep-key")
	if err != nil {
		t.Fatal(err)
	}
	aid := first.ArrayJobID
	starts := h.takeStarts(n)
	for _, st := range starts[:n-1] {
		code := 0
		if st.JobID == aid+"_2" {
			code = 3
		}
		h.run(st.JobID, code, time.Now())
	}
	h.waitState(aid+"_2", api.StateFailed)
	h.waitState(aid+"_4", api.StateCompleted)
	// Before the last task ends: all of it in memory.
	if array, tasks := h.inMemory(aid); !array || tasks != n {
		t.Fatalf("before the end: array in memory %v, %d tasks; want it whole", array, tasks)
	}
	before, err := h.o.FeatureOps().Arrays.Get(aid)
	if err != nil || before.Counts.Completed != n-2 || before.Counts.Failed != 1 || before.Counts.Active() != 1 {
		t.Fatalf("array before its end = %+v, %v", before.Counts, err)
	}
	countsBefore, statsBefore := h.o.JobStateCounts(), h.o.Statistics()

	h.run(starts[n-1].JobID, 0, time.Now())
	h.waitState(starts[n-1].JobID, api.StateCompleted)
	if array, tasks := h.inMemory(aid); array || tasks != 0 {
		t.Fatalf("done: array in memory %v, %d tasks; want none of it", array, tasks)
	}
	want := before
	want.Counts = api.ArrayCounts{Completed: n - 1, Failed: 1}
	want.State = api.StateFailed
	views := map[string]api.Job{}
	for i := range n {
		id := aid + "_" + strconv.Itoa(i)
		j, err := h.o.Job(id)
		if err != nil || !j.State.Terminal() || j.ExitCode == nil {
			t.Fatalf("task %s once done: %s (exit %v), %v", id, j.State, j.ExitCode, err)
		}
		views[id] = j
	}
	if c := h.o.JobStateCounts(); c[api.StateCompleted] != countsBefore[api.StateCompleted]+1 || c[api.StateFailed] != 1 || c[api.StateRunning] != 0 {
		t.Fatalf("state counts once done %v, before %v: want each task once", c, countsBefore)
	}
	if s := h.o.Statistics(); s.CompletedLastHour != statsBefore.CompletedLastHour+1 {
		t.Fatalf("completed in the last hour: %d once done, %d before", s.CompletedLastHour, statsBefore.CompletedLastHour)
	}
	countsDone := h.o.JobStateCounts()

	// Beside it: a plain job that ended, a queued one, and an array not
	// done (one task canceled, the others queued).
	plain := h.submit(api.SubmitRequest{Command: "plain", GPUCount: gpus(1), User: "ana"})
	h.finish(h.nextStart())
	h.o.SetScheduling(ctx, false)
	live := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(1), User: "ana", Array: "0-2"}).ArrayJobID
	if _, _, err := h.o.Cancel(ctx, live+"_1", 0); err != nil {
		t.Fatal(err)
	}
	queued := h.submit(api.SubmitRequest{Command: "q", GPUCount: gpus(1), User: "ana"})
	wantIDs := []string{queued.ID, live + "_2", live + "_1", live + "_0", plain.ID}
	for i := n - 1; i >= 0; i-- {
		wantIDs = append(wantIDs, aid+"_"+strconv.Itoa(i))
	}
	slices.SortFunc(wantIDs, func(a, b string) int { return strings.Compare(b, a) })

	check := func(when string) {
		t.Helper()
		a, err := h.o.FeatureOps().Arrays.Get(aid[:12])
		if err != nil {
			t.Fatalf("%s: Array: %v", when, err)
		}
		same(t, when+": the array", a, want)
		for id, v := range views {
			j, err := h.o.Job(id)
			if err != nil {
				t.Fatalf("%s: %s: %v", when, id, err)
			}
			same(t, when+": task "+id, j, v)
		}
		for _, limit := range []int{1, 2, 3, 5, 100} {
			if got := h.allPages(JobFilter{User: "ana"}, limit); !slices.Equal(got, wantIDs) {
				t.Fatalf("%s: GET /jobs?user=ana by %d:\n got %v\nwant %v", when, limit, got, wantIDs)
			}
		}
		if got := h.allPages(JobFilter{State: api.StateFailed}, 1); !slices.Equal(got, []string{aid + "_2"}) {
			t.Fatalf("%s: failed jobs %v", when, got)
		}
		sums := h.o.FeatureOps().Arrays.Summaries([]string{aid, live})
		if len(sums) != 2 || sums[0].Counts != want.Counts || sums[0].Tasks != nil || sums[1].Counts.Canceled != 1 {
			t.Fatalf("%s: summaries %+v", when, sums)
		}
		if u, p, ok := h.o.FeatureOps().Arrays.Owner(aid); !ok || u != "ana" || p != first.Project {
			t.Fatalf("%s: owner %q %q %v", when, u, p, ok)
		}
		if _, _, err := h.o.FeatureOps().Arrays.Cancel(ctx, aid, 0); !isStatus(err, 409) {
			t.Fatalf("%s: cancel of the done array: %v, want 409", when, err)
		}
		if j, replayed, err := h.o.Submit(ctx, req, "sweep-key"); err != nil || !replayed || j.ID != first.ID {
			t.Fatalf("%s: the array's idempotency key replays %s (replayed %v), %v; want its first task", when, j.ID, replayed, err)
		}
		if _, err := h.o.FeatureOps().Refs.JobID(aid); !isStatus(err, 404) || !strings.Contains(err.Error(), "is a job array") {
			t.Fatalf("%s: the array's id as a job: %v, want 404 is_array", when, err)
		}
		c := h.o.JobStateCounts()
		if c[api.StateCompleted] != countsDone[api.StateCompleted]+1 || c[api.StateFailed] != 1 || c[api.StateCanceled] != 1 || c[api.StateQueued] != 3 {
			t.Fatalf("%s: state counts %v; want %v and the new jobs, each once", when, c, countsDone)
		}
	}
	check("done")

	h.stop()
	h.stop = nil
	st, err := store.Open(ctx, h.path)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := st.Load(ctx)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range loaded.Jobs {
		got = append(got, j.ID)
	}
	if !slices.Equal(got, []string{live + "_1", queued.ID}) || len(loaded.Arrays) != 1 || loaded.Arrays[0].Array.ID != live {
		t.Fatalf("start-up loads jobs %v and %d arrays; want the array not done (its canceled task) and the queued job", got, len(loaded.Arrays))
	}
	h = start(t, h.path, nil)
	if array, tasks := h.inMemory(aid); array || tasks != 0 {
		t.Fatalf("after a restart: array in memory %v, %d tasks", array, tasks)
	}
	if array, tasks := h.inMemory(live); !array || tasks != 3 {
		t.Fatalf("after a restart: the array not done in memory %v, %d tasks; want it whole", array, tasks)
	}
	check("after a restart")

	// The throttle of a done array is stored with its record, as before.
	if a, err := h.o.FeatureOps().Arrays.SetThrottle(ctx, aid, 2); err != nil || a.Throttle != 2 || a.Counts != want.Counts {
		t.Fatalf("throttle of the done array: %+v, %v", a, err)
	}
}

// A job depending on an array that is done learns its outcome, whether it
// was waiting when the array left memory, or was submitted after a
// restart (the store's outcome, by the array's id or a prefix of it).
// Pruning keeps the array while a job waits on it.
func TestDependOnDoneArray(t *testing.T) {
	for name, tc := range map[string]struct {
		kind  string
		codes []int // the tasks' exit codes
		runs  bool  // the dependent starts; else it waits, never to be met
		task  int   // the culprit's index (when it does not run)
	}{
		"afterok, all completed": {"afterok", []int{0, 0, 0}, true, 0},
		"afterok, one failed":    {"afterok", []int{0, 1, 0}, false, 1},
		"afterany, one failed":   {"afterany", []int{0, 1, 0}, true, 0},
		"afterany, all failed":   {"afterany", []int{2, 1, 3}, true, 0},
		"afternotok, all failed": {"afternotok", []int{2, 1, 3}, true, 0},
		"afternotok, one ok":     {"afternotok", []int{2, 0, 3}, false, 1},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			h := startDeps(t, "", clk, 0)
			ctx := context.Background()
			aid := h.addArray(len(tc.codes), "sweep", "")
			waiting := h.submit(api.SubmitRequest{Command: "eval", GPUCount: gpus(1), DependsOn: tc.kind + ":" + aid})
			for range tc.codes {
				h.nextStart()
			}
			for i, code := range tc.codes {
				clk.add(time.Minute)
				h.run(aid+"_"+strconv.Itoa(i), code, clk.now())
			}
			last := api.StateCompleted
			if tc.codes[len(tc.codes)-1] != 0 {
				last = api.StateFailed
			}
			h.waitState(aid+"_"+strconv.Itoa(len(tc.codes)-1), last)
			expect := func(id, when string) {
				t.Helper()
				if tc.runs {
					if task := h.nextStart(); task.JobID != id {
						t.Fatalf("%s: started %s, want %s", when, task.JobID, id)
					}
					return
				}
				j := h.waitPending(id, api.ReasonDependencyNeverSatisfied)
				if culprit := aid + "_" + strconv.Itoa(tc.task); !strings.Contains(j.PendingMessage, culprit+" can never be met") {
					t.Fatalf("%s: %q; want it to name %s", when, j.PendingMessage, culprit)
				}
			}
			expect(waiting.ID, "waiting when the array ended")
			if array, tasks := h.inMemory(aid); array || tasks != 0 {
				t.Fatalf("the array is done but in memory (%v, %d tasks)", array, tasks)
			}
			if !tc.runs { // and it stays so, out of memory
				h.noStart()
				expect(waiting.ID, "once the array left memory")
			}
			if n, err := h.o.PruneOnce(ctx, clk.now().Add(time.Hour)); err != nil || n > 1 {
				t.Fatalf("pruned %d, %v: want at most the job that ran", n, err)
			}
			if a, err := h.o.FeatureOps().Arrays.Get(aid); err != nil || a.Counts.Total() != len(tc.codes) {
				t.Fatalf("pruning took the array: %+v, %v", a, err)
			}

			h.stop()
			h.stop = nil
			h = startDeps(t, h.path, clk, 0)
			if !tc.runs {
				expect(waiting.ID, "after a restart")
			}
			later := h.submit(api.SubmitRequest{Command: "eval", GPUCount: gpus(1), DependsOn: tc.kind + ":" + aid[:len(aid)-1]}) // a prefix
			if later.DependsOn != tc.kind+":"+aid {
				t.Fatalf("depends_on %q, want the array's whole id", later.DependsOn)
			}
			expect(later.ID, "submitted after a restart")
		})
	}
}

// aftercorr on a done array: task i of the new array waits on task i of
// the done one, read from the store; an index the done array lacks
// waits on nothing.
func TestAfterCorrOnDoneArray(t *testing.T) {
	clk := newClock()
	h := startDeps(t, "", clk, 0)
	aid := h.addArray(2, "prep", "")
	h.nextStart()
	h.nextStart()
	h.run(aid+"_0", 0, clk.now())
	h.run(aid+"_1", 1, clk.now())
	h.waitState(aid+"_1", api.StateFailed)
	if array, _ := h.inMemory(aid); array {
		t.Fatal("the array is done but in memory")
	}
	next := h.addArray(3, "train", "aftercorr:"+aid)
	started := map[string]bool{h.nextStart().JobID: true, h.nextStart().JobID: true}
	if !started[next+"_0"] || !started[next+"_2"] {
		t.Fatalf("started %v; want tasks 0 (after a completed task) and 2 (none to wait for)", started)
	}
	if j := h.waitPending(next+"_1", api.ReasonDependencyNeverSatisfied); !strings.Contains(j.PendingMessage, aid+"_1") {
		t.Fatalf("task 1: %q; want it to name %s_1", j.PendingMessage, aid)
	}
}
