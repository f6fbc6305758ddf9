package ended

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

func TestRememberKeepsTheLastRecent(t *testing.T) {
	var b Books
	jobs := make([]*api.Job, Recent+2)
	for i := range jobs {
		jobs[i] = &api.Job{ID: fmt.Sprintf("j%05d", i)}
		b.Remember(jobs[i], i == 1 || i == Recent+1)
	}
	for _, tc := range []struct {
		i          int
		kept, slim bool
	}{
		{0, false, false},        // the oldest, forgotten
		{1, false, false},        // forgotten with its slim mark
		{2, true, false},         // the oldest kept
		{Recent + 1, true, true}, // the newest, slim
		{Recent, true, false},
	} {
		id := jobs[tc.i].ID
		if j, ok := b.Get(id); ok != tc.kept || (ok && j != jobs[tc.i]) {
			t.Errorf("%s: kept %v, want %v", id, ok, tc.kept)
		}
		if b.Slim(id) != tc.slim {
			t.Errorf("%s: slim %v, want %v", id, b.Slim(id), tc.slim)
		}
	}
	n := 0
	for range b.All() {
		n++
	}
	if n != Recent {
		t.Errorf("%d recent jobs, want %d", n, Recent)
	}
	b.Forget(jobs[Recent+1].ID)
	if _, ok := b.Get(jobs[Recent+1].ID); ok || b.Slim(jobs[Recent+1].ID) {
		t.Error("a forgotten job is still there")
	}
}

func TestLeftCountsAndCompacts(t *testing.T) {
	var b Books
	done := []*api.Job{{ID: "a", State: api.StateCompleted}, {ID: "b", State: api.StateFailed}, {ID: "c", State: api.StateCompleted}}
	if b.Left(done, 10_000) {
		t.Error("3 stale ids of 10,000 compacted")
	}
	b.Remember(done[0], false)
	b.Pruned(store.PrunedJob{ID: "a", State: api.StateCompleted})
	b.Pruned(store.PrunedJob{ID: "z", State: api.StateCanceled}) // never counted: stays at 0
	got := map[api.State]int{}
	for s, n := range b.ByState() {
		got[s] = n
	}
	if got[api.StateCompleted] != 1 || got[api.StateFailed] != 1 || got[api.StateCanceled] != 0 {
		t.Errorf("counts %v", got)
	}
	if _, ok := b.Get("a"); ok {
		t.Error("a pruned job is still recent")
	}
	many := make([]*api.Job, 1200)
	for i := range many {
		many[i] = &api.Job{ID: fmt.Sprint(i), State: api.StateCompleted}
	}
	if !b.Left(many, 200) {
		t.Error("1,203 stale ids of 200 (over half of it and 1,024) not compacted")
	}
	if b.Left(done, 200) {
		t.Error("the stale count did not start again after a compaction")
	}
}

func TestRow(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	started, finished := at.Add(-time.Hour), at.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		job  api.Job
		end  time.Time
		run  float64
	}{
		{"completed", api.Job{State: api.StateCompleted, StartedAt: &started}, at, 3600},
		{"finished at", api.Job{State: api.StateCompleted, StartedAt: &started, FinishedAt: &finished}, finished, 3540},
		{"failed: no run time", api.Job{State: api.StateFailed, StartedAt: &started}, at, 0},
	} {
		r := Row(&tc.job, at)
		if !r.FinishedAt.Equal(tc.end) || r.RunSeconds != tc.run {
			t.Errorf("%s: %+v, want end %v run %v", tc.name, r, tc.end, tc.run)
		}
	}
}

func TestLoad(t *testing.T) {
	var b Books
	b.Left([]*api.Job{{State: api.StateFailed}}, 0) // replaced by the summary
	runs := b.Load([]store.UsageRow{
		{User: "ann", State: api.StateCompleted, Jobs: 15, RunSeconds: 1500},
		{User: "ann", State: api.StateCompleted, Jobs: 10, RunSeconds: 5000}, // past 20: taken whole, then no more
		{User: "ann", State: api.StateCompleted, Jobs: 10, RunSeconds: 9999},
		{User: "bob", State: api.StateFailed, Jobs: 2},
		{User: "cy", State: api.StateCompleted, Jobs: 2, RunSeconds: 120},
	})
	if r := runs["ann"]; r.N != EstimatorRuns || r.Mean != 260*time.Second {
		t.Errorf("ann: %+v, want 20 runs of 260s", r)
	}
	if _, ok := runs["bob"]; ok {
		t.Error("bob completed nothing")
	}
	if r := runs["cy"]; r.N != 2 || r.Mean != time.Minute {
		t.Errorf("cy: %+v", r)
	}
	got := map[api.State]int{}
	for s, n := range b.ByState() {
		got[s] = n
	}
	if got[api.StateCompleted] != 37 || got[api.StateFailed] != 2 {
		t.Errorf("counts %v", got)
	}
}

func TestSummarize(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	done := &api.Job{ID: "done", User: "ann", State: api.StateFailed}
	task := &api.Job{ID: "task", ArrayJobID: "arr", State: api.StateFailed}
	running := &api.Job{ID: "run", State: api.StateRunning}
	b := store.Batch{Events: []store.JobEvent{
		{JobID: "run", Event: api.Event{At: at, To: api.StateRunning}},
		{JobID: "done", Event: api.Event{At: at, To: api.StateFailed}},
		{JobID: "task", Event: api.Event{At: at, To: api.StateFailed}},    // its array's row, later
		{JobID: "gone", Event: api.Event{At: at, To: api.StateCompleted}}, // not among the changed
	}}
	Summarize(&b, map[string]*api.Job{"done": done, "task": task, "run": running})
	if len(b.Ended) != 1 || b.Ended[0].User != "ann" || b.Ended[0].State != api.StateFailed || !b.Ended[0].FinishedAt.Equal(at) {
		t.Errorf("rows %+v, want one for done", b.Ended)
	}
}

// TestRebuild: the summary's GPU time is charged at each hour's middle,
// and each user's completed runs teach the estimator.
func TestRebuild(t *testing.T) {
	hour := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b Books
	ledger, est := sched.NewLedger(time.Hour), sched.NewEstimator()
	b.Rebuild([]store.UsageRow{
		{User: "ann", Project: "p", Hour: hour, State: api.StateCompleted, Jobs: 2, RunSeconds: 240, GPUSeconds: 3600},
		{User: "bob", Project: "q", Hour: hour, State: api.StateFailed, Jobs: 1},
	}, ledger, est)
	if u := ledger.Usage(hour.Add(30 * time.Minute)); u.Users["ann"] != 3600 || u.Projects["p"] != 3600 || u.Users["bob"] != 0 {
		t.Errorf("usage %+v, want ann's 3600 GPU-seconds at the hour's middle", u)
	}
	if d, ok := est.Estimate("ann"); !ok || d != 2*time.Minute {
		t.Errorf("ann's estimate %v %v, want 2m", d, ok)
	}
	if _, ok := est.Estimate("bob"); ok {
		t.Error("bob completed nothing")
	}
}
