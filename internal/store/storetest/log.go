package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// Log is what the orchestrator needs of a store (store.Backend): the
// Log, and the reads of what its memory no longer holds. *store.Store is
// one on either database; memstore.Store is one in memory, for tests.
type Log = store.Backend

// RunLog runs the part of the suite that holds for every Log, in a
// database or in memory: what a batch writes, what start-up loads back,
// and the reads of ended jobs and done arrays. newLog returns a fresh,
// empty one for each test.
func RunLog(t *testing.T, newLog func(t *testing.T) Log) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Log)
	}{
		{"LoadsWhatIsLive", testLoadsWhatIsLive},
		{"ReadsEndedJobs", testReadsEndedJobs},
		{"DoneArrays", testDoneArrays},
		{"NumbersAndNames", testNumbersAndNames},
		{"RefusedBatchWritesNothing", testRefusedBatchWritesNothing},
		{"UsageLedger", testUsageLedger},
		{"HistorySamples", testHistorySamples},
		{"PrunesRuns", testPrunesRuns},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLog(t)) })
	}
}

func commit(t *testing.T, s Log, b *store.Batch) {
	t.Helper()
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func job(id, user string, st api.State, min int) api.Job {
	j := api.Job{ID: id, User: user, Project: "p", Name: "n-" + user, Command: "true", State: st, Priority: api.PriorityNormal, SubmittedAt: at.Add(time.Duration(min) * time.Minute)}
	if st.Terminal() {
		s, f := j.SubmittedAt.Add(time.Minute), j.SubmittedAt.Add(10*time.Minute)
		j.StartedAt, j.FinishedAt = &s, &f
	}
	return j
}

// testLoadsWhatIsLive: Load gives back the jobs not ended with their
// events in order and their keys, holds, settings, nodes and bookings
// as last written, and none of what was deleted or ended.
func testLoadsWhatIsLive(t *testing.T, s Log) {
	ctx := context.Background()
	ev := func(id string, to api.State, r string) store.JobEvent {
		return store.JobEvent{JobID: id, Event: api.Event{At: at, To: to, Reason: r}}
	}
	commit(t, s, &store.Batch{
		Jobs:        []api.Job{job("j2", "ana", api.StateQueued, 1), job("j1", "bob", api.StateQueued, 0), job("j3", "ana", api.StateQueued, 2)},
		Events:      []store.JobEvent{ev("j1", api.StateQueued, api.ReasonSubmitted), ev("j2", api.StateQueued, api.ReasonSubmitted), ev("j3", api.StateQueued, api.ReasonSubmitted)},
		Idempotency: map[string]string{"k1": "j1", "k3": "j3"},
		Holds:       []api.Hold{{JobID: "h2", HeldAt: at}, {JobID: "h1", HeldAt: at}},
		Settings:    map[string]string{"policy": "fcfs"},
		Nodes:       map[string]string{"n1": `{"id":"n1"}`},
		Bookings:    []api.Reservation{{Name: "b", GPUs: 1}, {Name: "a", GPUs: 2}},
	})
	j1 := job("j1", "bob", api.StateRunning, 0)
	commit(t, s, &store.Batch{
		Jobs:           []api.Job{j1, job("j3", "ana", api.StateCanceled, 2)},
		Events:         []store.JobEvent{ev("j1", api.StateRunning, api.ReasonStarted)},
		DeleteHolds:    []string{"h2"},
		Settings:       map[string]string{"policy": "fairshare"},
		DeleteBookings: []string{"b"},
	})
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range st.Jobs {
		ids = append(ids, fmt.Sprintf("%s:%s:%d", j.ID, j.State, len(j.Events)))
	}
	if got, want := fmt.Sprint(ids), "[j1:running:2 j2:queued:1]"; got != want {
		t.Errorf("jobs = %s, want %s", got, want)
	}
	if len(st.Jobs) > 0 && (st.Jobs[0].Events[1].To != api.StateRunning) {
		t.Errorf("j1's events = %+v: want submitted, then started", st.Jobs[0].Events)
	}
	if fmt.Sprint(st.Idempotency) != "map[k1:j1]" {
		t.Errorf("keys = %v: want only the live job's", st.Idempotency)
	}
	if len(st.Holds) != 1 || st.Holds[0].JobID != "h1" {
		t.Errorf("holds = %+v: want h1", st.Holds)
	}
	if st.Settings["policy"] != "fairshare" || st.Nodes["n1"] != `{"id":"n1"}` {
		t.Errorf("settings = %v, nodes = %v", st.Settings, st.Nodes)
	}
	if len(st.Bookings) != 1 || st.Bookings[0].Name != "a" {
		t.Errorf("bookings = %+v: want a", st.Bookings)
	}
	// A key once given stays given, whatever became of its job.
	if id, ok, err := s.IdempotentJob(ctx, "k3"); err != nil || !ok || id != "j3" {
		t.Errorf("IdempotentJob(k3) = %q %v %v", id, ok, err)
	}
}

// testReadsEndedJobs: a job that ended is read by id with its events, in
// pages newest first under each filter, by prefix; pruning takes it, its
// events, key and summary row away, but not one that is kept.
func testReadsEndedJobs(t *testing.T, s Log) {
	ctx := context.Background()
	b := &store.Batch{Idempotency: map[string]string{"k": "e1"}}
	for i, u := range []string{"ana", "bob", "ana", "ana"} {
		j := job(fmt.Sprintf("e%d", i+1), u, api.StateCompleted, i)
		b.Jobs = append(b.Jobs, j)
		b.Events = append(b.Events, store.JobEvent{JobID: j.ID, Event: api.Event{At: j.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}})
		b.Ended = append(b.Ended, store.EndedJob{User: u, Project: "p", State: j.State, FinishedAt: *j.FinishedAt, GPUSeconds: 60, RunSeconds: 540})
	}
	b.Jobs = append(b.Jobs, job("q1", "ana", api.StateQueued, 9))
	commit(t, s, b)
	if j, err := s.Job(ctx, "e2"); err != nil || j.User != "bob" || len(j.Events) != 1 {
		t.Errorf("Job(e2) = %+v, %v", j, err)
	}
	if _, err := s.Job(ctx, "nope"); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("Job(nope) = %v, want ErrNoJob", err)
	}
	for _, tc := range []struct {
		q    store.JobQuery
		want string
	}{
		{store.JobQuery{}, "[q1 e4 e3 e2 e1]"},
		{store.JobQuery{States: []api.State{api.StateCompleted}, User: "ana"}, "[e4 e3 e1]"},
		{store.JobQuery{States: []api.State{api.StateCompleted}, Limit: 2}, "[e4 e3]"},
		{store.JobQuery{Before: "e3"}, "[e2 e1]"},
		{store.JobQuery{Since: at.Add(time.Minute), Until: at.Add(3 * time.Minute)}, "[e3 e2]"},
		{store.JobQuery{Name: "n-bob"}, "[e2]"},
		{store.JobQuery{MaxBytes: 1}, "[q1]"},
	} {
		jobs, _, err := s.JobsPage(ctx, tc.q)
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if err != nil || fmt.Sprint(ids) != tc.want {
			t.Errorf("JobsPage(%+v) = %v, %v; want %s", tc.q, ids, err, tc.want)
		}
	}
	if _, cut, _ := s.JobsPage(ctx, store.JobQuery{MaxBytes: 1}); !cut {
		t.Error("JobsPage with MaxBytes 1: not cut")
	}
	if ids, err := s.JobIDsWithPrefix(ctx, "e", 3); err != nil || fmt.Sprint(ids) != "[e1 e2 e3]" {
		t.Errorf("JobIDsWithPrefix(e, 3) = %v, %v", ids, err)
	}
	sum, err := s.EndedSummary(ctx)
	if err != nil || len(sum) != 2 || sum[0].User != "ana" || sum[0].Jobs != 3 || sum[0].GPUSeconds != 180 || sum[1].Jobs != 1 {
		t.Errorf("EndedSummary = %+v, %v: want ana 3 jobs 180 s, bob 1", sum, err)
	}
	gone, err := s.PruneFinished(ctx, at.Add(time.Hour), 10, []string{"e3"})
	if err != nil || len(gone) != 3 {
		t.Fatalf("PruneFinished keeping e3 = %v, %v: want e1, e2, e4", gone, err)
	}
	if _, err := s.Job(ctx, "e1"); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("Job(e1) after pruning = %v", err)
	}
	if _, ok, _ := s.IdempotentJob(ctx, "k"); ok {
		t.Error("e1's key outlived it")
	}
	if sum, _ := s.EndedSummary(ctx); len(sum) != 1 || sum[0].User != "ana" || sum[0].Jobs != 1 {
		t.Errorf("EndedSummary after pruning = %+v: want ana's one kept job", sum)
	}
	if gone, err := s.PruneFinished(ctx, at.Add(time.Hour), 10, []string{"e3"}); err != nil || len(gone) != 0 {
		t.Errorf("PruneFinished again = %v, %v: want nothing left", gone, err)
	}
}

// testDoneArrays: the ended tasks of an array are live until the array
// is done; then its record, counts and deciding task are read on demand,
// and it is pruned whole.
func testDoneArrays(t *testing.T, s Log) {
	ctx := context.Background()
	rec := store.ArrayRecord{Array: api.Array{ID: "a1", User: "ana", Array: "0-2", Tasks: []int{0, 1, 2}, Priority: api.PriorityNormal}, Template: api.Job{Command: "echo", Priority: api.PriorityNormal}}
	zero := 0
	t0 := api.Job{ID: "a1_0", ArrayJobID: "a1", ArrayTaskID: &zero, User: "ana", State: api.StateFailed, Priority: api.PriorityNormal, SubmittedAt: at}
	fin := at.Add(time.Minute)
	t0.FinishedAt = &fin
	commit(t, s, &store.Batch{Arrays: []store.ArrayRecord{rec}, Jobs: []api.Job{t0}})
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || len(st.Jobs) != 1 || st.Jobs[0].ID != "a1_0" {
		t.Fatalf("Load before a1 is done = %d arrays, %+v: want a1 and its ended task", len(st.Arrays), st.Jobs)
	}
	if got, err := s.Array(ctx, "a1"); err != nil || got.Array.Counts != (api.ArrayCounts{Queued: 2, Failed: 1}) {
		t.Errorf("Array(a1) = %+v, %v: want 2 queued (no rows), 1 failed", got.Array.Counts, err)
	}
	b := &store.Batch{}
	for i := 1; i <= 2; i++ {
		end := at.Add(time.Duration(10-i) * time.Minute)
		b.Jobs = append(b.Jobs, api.Job{ID: fmt.Sprintf("a1_%d", i), ArrayJobID: "a1", ArrayTaskID: &i, User: "ana", State: api.StateFailed, Priority: api.PriorityNormal, SubmittedAt: at, FinishedAt: &end})
	}
	rec.Finished = at.Add(10 * time.Minute)
	b.Arrays = []store.ArrayRecord{rec}
	commit(t, s, b)
	if st, err = s.Load(ctx); err != nil || len(st.Arrays)+len(st.Jobs) != 0 {
		t.Fatalf("Load after a1 is done = %d arrays, %d jobs, %v: want none", len(st.Arrays), len(st.Jobs), err)
	}
	if got, err := s.Array(ctx, "a1"); err != nil || !got.Finished.Equal(rec.Finished) || got.Array.Counts.Failed != 3 {
		t.Errorf("Array(a1) = %+v, %v", got, err)
	}
	if _, err := s.Array(ctx, "a9"); !errors.Is(err, store.ErrNoArray) {
		t.Errorf("Array(a9) = %v, want ErrNoArray", err)
	}
	if j, err := s.FirstEnded(ctx, "a1", api.StateFailed); err != nil || j.ID != "a1_0" {
		t.Errorf("FirstEnded(a1) = %s, %v: want a1_0, the first to fail", j.ID, err)
	}
	if j, err := s.Job(ctx, "a1_1"); err != nil || len(j.Events) == 0 || j.Events[0].Reason != api.ReasonSubmitted {
		t.Errorf("Job(a1_1) = %+v, %v: want its array's submission event", j, err)
	}
	commit(t, s, &store.Batch{Jobs: []api.Job{job("a1x", "ana", api.StateQueued, 0)}})
	if ids, err := s.DependencyIDs(ctx, "a1", 5); err != nil || fmt.Sprint(ids) != "[a1 a1x]" {
		t.Errorf("DependencyIDs(a1) = %v, %v: want the array and a1x, not its tasks", ids, err)
	}
	if ids, err := s.ArrayIDsWithPrefix(ctx, "a", 5); err != nil || fmt.Sprint(ids) != "[a1]" {
		t.Errorf("ArrayIDsWithPrefix(a) = %v, %v", ids, err)
	}
	if tasks, arrays, err := s.PruneDoneArrays(ctx, at.Add(time.Hour), 10, []string{"a1"}); err != nil || len(tasks)+len(arrays) != 0 {
		t.Errorf("PruneDoneArrays keeping a1 = %v %v, %v", tasks, arrays, err)
	}
	tasks, arrays, err := s.PruneDoneArrays(ctx, at.Add(time.Hour), 10, nil)
	if err != nil || len(tasks) != 3 || fmt.Sprint(arrays) != "[a1]" {
		t.Errorf("PruneDoneArrays = %v %v, %v: want a1 and its 3 tasks", tasks, arrays, err)
	}
	if _, err := s.Job(ctx, "a1_0"); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("Job(a1_0) after pruning = %v", err)
	}
}

// testNumbersAndNames: numbers are read back by number and in names'
// answers; start-up goes on after the largest, pruned or not.
func testNumbersAndNames(t *testing.T, s Log) {
	ctx := context.Background()
	old := job("j1", "ana", api.StateCompleted, 0)
	old.Name = "train"
	cur := job("j2", "ana", api.StateQueued, 1)
	cur.Name = "train"
	zero := 0
	task := api.Job{ID: "a1_0", ArrayJobID: "a1", ArrayTaskID: &zero, Name: "train", User: "ana", State: api.StateQueued, Priority: api.PriorityNormal, SubmittedAt: at}
	commit(t, s, &store.Batch{Jobs: []api.Job{old, cur, task, job("j3", "bob", api.StateQueued, 2)},
		Numbers: []store.NumberRow{{Number: 1, ID: "j1"}, {Number: 2, ID: "j2"}, {Number: 3, ID: "a1"}}})
	if id, ok, err := s.NumberID(ctx, 2); err != nil || !ok || id != "j2" {
		t.Errorf("NumberID(2) = %q %v %v", id, ok, err)
	}
	if _, ok, err := s.NumberID(ctx, 9); err != nil || ok {
		t.Errorf("NumberID(9) = %v %v: want none", ok, err)
	}
	named, err := s.NamedJobs(ctx, "ana", "train", 10)
	if got := fmt.Sprint(named); err != nil || got != "[{j2 2 false} {j1 1 false} {a1 3 true}]" {
		t.Errorf("NamedJobs(ana, train) = %s, %v", got, err)
	}
	if named, _ := s.NamedJobs(ctx, "bob", "train", 10); len(named) != 0 {
		t.Errorf("NamedJobs(bob, train) = %v: names are the caller's", named)
	}
	if st, err := s.Load(ctx); err != nil || st.MaxNumber != 3 {
		t.Errorf("MaxNumber = %v, %v: want 3", st, err)
	}
}

// testRefusedBatchWritesNothing: a batch that gives a number twice fails
// whole, as an error no retry can fix, and writes none of its rows.
func testRefusedBatchWritesNothing(t *testing.T, s Log) {
	ctx := context.Background()
	commit(t, s, &store.Batch{Jobs: []api.Job{job("j1", "ana", api.StateQueued, 0)}, Numbers: []store.NumberRow{{Number: 1, ID: "j1"}}})
	err := s.Commit(ctx, &store.Batch{
		Jobs:     []api.Job{job("j2", "ana", api.StateQueued, 1)},
		Settings: map[string]string{"x": "y"},
		Numbers:  []store.NumberRow{{Number: 1, ID: "j2"}},
	})
	if err == nil || !store.Permanent(err) {
		t.Fatalf("commit of a number given twice = %v: want a permanent error", err)
	}
	st, err := s.Load(ctx)
	if err != nil || len(st.Jobs) != 1 || st.Settings["x"] != "" {
		t.Errorf("after the refused batch: %d jobs, settings %v, %v: want it unwritten", len(st.Jobs), st.Settings, err)
	}
	if err := s.Commit(ctx, &store.Batch{Numbers: []store.NumberRow{{Number: 0, ID: "j9"}}}); !store.Permanent(err) {
		t.Errorf("commit of number 0 = %v: want a permanent error", err)
	}
}

// testUsageLedger: usage rows are upserts by kind, id, attempt and node,
// read by the interval they overlap in the order they ended, and summed.
func testUsageLedger(t *testing.T, s Log) {
	ctx := context.Background()
	rec := func(id string, start, end int, gpuSec float64) usage.Record {
		return usage.Record{Kind: "job", ID: id, User: "ana", Project: "p", GPUModel: "H100", Node: "n1", GPUs: 1,
			Start: at.Add(time.Duration(start) * time.Hour), End: at.Add(time.Duration(end) * time.Hour), GPUSeconds: gpuSec}
	}
	commit(t, s, &store.Batch{Usage: []usage.Record{rec("b", 0, 2, 1), rec("a", 1, 3, 1)}})
	commit(t, s, &store.Batch{Usage: []usage.Record{rec("c", 4, 5, 5), rec("a", 1, 3, 2)}})
	got, err := s.UsageRecords(ctx, at.Add(2*time.Hour), at.Add(4*time.Hour))
	var ids []string
	for _, r := range got {
		ids = append(ids, fmt.Sprintf("%s:%g", r.ID, r.GPUSeconds))
	}
	if err != nil || fmt.Sprint(ids) != "[b:1 a:2]" {
		t.Errorf("UsageRecords[2h, 4h) = %v, %v: want b, then a as last written", ids, err)
	}
	tot, err := s.UsageTotals(ctx)
	if err != nil || len(tot) != 1 || tot[0].GPUSeconds != 8 {
		t.Errorf("UsageTotals = %+v, %v: want ana's 8 GPU-seconds", tot, err)
	}
}

// testHistorySamples: a sample replaces one taken at the same time, and
// those before the horizon are dropped.
func testHistorySamples(t *testing.T, s Log) {
	ctx := context.Background()
	for i, d := range []string{"a", "b", "c", "C"} {
		at := at.Add(time.Duration(min(i, 2)) * time.Minute)
		if err := s.PutHistory(ctx, at, []byte(d), at.Add(-90*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.History(ctx, time.Time{})
	var got []string
	for _, r := range rows {
		got = append(got, string(r.Data))
	}
	if err != nil || fmt.Sprint(got) != "[b C]" {
		t.Errorf("History = %v, %v: want b, C", got, err)
	}
}

// testPrunesRuns: PruneRuns deletes the oldest runs that ended before the
// time given, at most limit at once, never one of the keep most recent;
// Load reads back what is left, oldest first.
func testPrunesRuns(t *testing.T, s Log) {
	ctx := context.Background()
	var b store.Batch
	for i := range 5 {
		b.Runs = append(b.Runs, store.RunRow{JobID: fmt.Sprintf("r%d", i), Attempt: 0, User: "ana", Project: "p", Name: "sweep",
			CommandFP: "fp", GPUs: 1, GPUModel: "H100", Ran: time.Duration(i+1) * time.Minute,
			EndedAt: at.Add(time.Duration(i) * time.Hour), Outcome: "exited"})
	}
	commit(t, s, &b)
	left := func() []string {
		t.Helper()
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range st.Runs {
			ids = append(ids, r.JobID)
		}
		return ids
	}
	steps := []struct {
		before      time.Time
		keep, limit int
		want        int
		left        string
	}{
		{at.Add(10 * time.Hour), 10, 100, 0, "[r0 r1 r2 r3 r4]"}, // fewer than keep: none goes
		{at.Add(90 * time.Minute), 0, 100, 2, "[r2 r3 r4]"},      // ended before 01:30: r0, r1
		{at.Add(10 * time.Hour), 2, 1, 1, "[r3 r4]"},             // the limit: one at a time
		{at.Add(10 * time.Hour), 2, 100, 0, "[r3 r4]"},           // the 2 most recent stay
	}
	for i, st := range steps {
		n, err := s.PruneRuns(ctx, st.before, st.keep, st.limit)
		if err != nil || n != st.want {
			t.Fatalf("step %d: PruneRuns = %d, %v; want %d", i, n, err, st.want)
		}
		if got := fmt.Sprint(left()); got != st.left {
			t.Fatalf("step %d: runs left %s, want %s", i, got, st.left)
		}
	}
}
