package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// historyStore is a store holding, for users ana and bob, 30 jobs each
// (j000..j059, submitted a minute apart): every third queued (live), the
// others completed or failed, with two events each; and two tasks of an
// array (not done), one ended.
func historyStore(t *testing.T) (*Store, time.Time) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &Batch{Idempotency: map[string]string{}}
	for i := range 60 {
		j := api.Job{ID: fmt.Sprintf("j%03d", i), User: []string{"ana", "bob"}[i%2], Project: "p", Name: fmt.Sprintf("n%d", i%5), Priority: api.PriorityNormal,
			State: api.StateQueued, SubmittedAt: base.Add(time.Duration(i) * time.Minute)}
		b.Events = append(b.Events, JobEvent{j.ID, api.Event{At: j.SubmittedAt, To: api.StateQueued}})
		if i%3 != 0 {
			start, end := j.SubmittedAt.Add(time.Second), j.SubmittedAt.Add(time.Duration(10+i)*time.Second)
			j.State, j.StartedAt, j.FinishedAt, j.GPUSeconds = api.StateCompleted, &start, &end, 10
			if i%3 == 2 {
				j.State = api.StateFailed
			}
			b.Events = append(b.Events, JobEvent{j.ID, api.Event{At: end, From: api.StateQueued, To: j.State}})
			b.Ended = append(b.Ended, EndedJob{User: j.User, Project: j.Project, State: j.State, FinishedAt: end, GPUSeconds: 10, RunSeconds: end.Sub(start).Seconds()})
		}
		b.Idempotency[fmt.Sprintf("key%d", i)] = j.ID
		b.Jobs = append(b.Jobs, j)
	}
	end := base
	b.Jobs = append(b.Jobs, api.Job{ID: "ja_0", ArrayJobID: "ja", User: "ana", Priority: api.PriorityNormal, State: api.StateCompleted, FinishedAt: &end, GPUSeconds: 5},
		api.Job{ID: "ja_1", ArrayJobID: "ja", User: "ana", Priority: api.PriorityNormal, State: api.StateQueued})
	b.Arrays = append(b.Arrays, ArrayRecord{Array: api.Array{ID: "ja", User: "ana", Array: "0-1", TaskCount: 2, Tasks: []int{0, 1}, Priority: api.PriorityNormal},
		Template: api.Job{Priority: api.PriorityNormal}})
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	return s, base
}

func ids(jobs []api.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// Load reads the live jobs (queued ones, and the tasks of an array not
// done) with their
// events and keys, never the ended ones; the queries read the ended ones
// by filter, newest first, a page at a time.
func TestHistoryLoadAndQueries(t *testing.T) {
	ctx := context.Background()
	s, base := historyStore(t)
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 60; i += 3 {
		want = append(want, fmt.Sprintf("j%03d", i))
	}
	want = append(want, "ja_0", "ja_1")
	if got := ids(st.Jobs); !slices.Equal(got, want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	if len(st.Jobs[1].Events) != 1 || st.Idempotency["key3"] != "j003" || st.Idempotency["key1"] != "" {
		t.Fatalf("loaded events %v, keys %v: want the live jobs' only", st.Jobs[1].Events, st.Idempotency)
	}

	ended := []api.State{api.StateCompleted, api.StateFailed, api.StateCanceled}
	for name, tc := range map[string]struct {
		q    JobQuery
		want []string
	}{
		"user, newest first":   {JobQuery{User: "bob", States: ended, SkipArrays: []string{"ja"}, Limit: 3}, []string{"j059", "j055", "j053"}},
		"next page":            {JobQuery{User: "bob", States: ended, SkipArrays: []string{"ja"}, Limit: 3, Before: "j053"}, []string{"j049", "j047", "j043"}},
		"state":                {JobQuery{States: []api.State{api.StateFailed}, Limit: 2}, []string{"j059", "j056"}},
		"name":                 {JobQuery{Name: "n4", States: ended, Limit: 2}, []string{"j059", "j049"}},
		"since until":          {JobQuery{Since: base.Add(10 * time.Minute), Until: base.Add(13 * time.Minute), Limit: 10}, []string{"j012", "j011", "j010"}},
		"array tasks too":      {JobQuery{User: "ana", States: ended, Limit: 1}, []string{"ja_0"}},
		"array tasks left out": {JobQuery{User: "ana", States: ended, SkipArrays: []string{"ja"}, Limit: 1}, []string{"j058"}},
	} {
		got, err := s.Jobs(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: got %v, want %v", name, ids(got), tc.want)
		}
	}

	j, err := s.Job(ctx, "j004")
	if err != nil || j.State != api.StateCompleted || len(j.Events) != 2 || j.Events[1].To != api.StateCompleted {
		t.Fatalf("Job(j004) = %+v, %v: want it completed with its two events", j, err)
	}
	if _, err := s.Job(ctx, "nope"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("Job(nope) = %v, want ErrNoJob", err)
	}
	if got, _ := s.JobIDsWithPrefix(ctx, "j05", 3); !slices.Equal(got, []string{"j050", "j051", "j052"}) {
		t.Fatalf("prefix j05: %v", got)
	}
	if id, ok, _ := s.IdempotentJob(ctx, "key7"); !ok || id != "j007" {
		t.Fatalf("key7 -> %q %v", id, ok)
	}
	n, err := s.CountFinished(ctx)
	if err != nil || n[api.StateCompleted] != 20 || n[api.StateFailed] != 20 {
		t.Fatalf("counts %v %v: want 20 completed, 20 failed (the array's task not counted)", n, err)
	}
	rows, err := s.EndedSummary(ctx)
	var gpu, run float64
	for _, r := range rows {
		gpu += r.GPUSeconds
		if r.User == "bob" && r.State == api.StateCompleted {
			run += r.RunSeconds
		}
	}
	// bob's completed jobs: j001, j007, ..., j055 (i = 1 mod 6), each ran 9+i seconds.
	wantRun := 0.0
	for i := 1; i < 60; i += 6 {
		wantRun += float64(9 + i)
	}
	if err != nil || gpu != 400 || run != wantRun {
		t.Fatalf("summary: %v GPU-seconds, bob's runs %v s, %v: want 400 (40 ended jobs, not the array's task) and %v", gpu, run, err, wantRun)
	}
}

// PruneFinished deletes ended jobs that finished before the time, in
// batches, with their events and keys; live jobs and array tasks stay.
func TestPruneFinished(t *testing.T) {
	ctx := context.Background()
	s, base := historyStore(t)
	var pruned []PrunedJob
	for {
		got, err := s.PruneFinished(ctx, base.Add(30*time.Minute), 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		if len(got) > 7 {
			t.Fatalf("a batch of %d, want at most 7", len(got))
		}
		pruned = append(pruned, got...)
	}
	if len(pruned) != 20 { // j001..j029 not multiple of three, all finished before 30 min
		t.Fatalf("pruned %d jobs, want 20: %v", len(pruned), pruned)
	}
	if _, err := s.Job(ctx, "j001"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("j001 after pruning: %v", err)
	}
	if _, ok, _ := s.IdempotentJob(ctx, "key1"); ok {
		t.Fatal("j001's idempotency key kept")
	}
	var events int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE job_id = 'j001'`).Scan(&events); err != nil || events != 0 {
		t.Fatalf("j001's events: %d %v", events, err)
	}
	for _, id := range []string{"j000", "j031", "ja_0"} {
		if _, err := s.Job(ctx, id); err != nil {
			t.Errorf("%s: %v, want it kept", id, err)
		}
	}
}

// A store of schema version 4 (no query columns) gets them, filled from
// its rows' JSON, when this version opens it.
func TestMigrateJobColumns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// Make it a version 4 store: the old table, one ended job.
	for _, q := range []string{`DROP TABLE jobs`, `DROP TABLE job_usage`, `CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT NOT NULL, user TEXT NOT NULL, project TEXT NOT NULL, data TEXT NOT NULL)`,
		`INSERT INTO jobs VALUES('j1', 'completed', 'ana', 'p', '{"id":"j1","name":"train","state":"completed","user":"ana","project":"p","submitted_at":"2026-01-01T00:00:00Z","finished_at":"2026-01-01T01:00:00Z","gpu_seconds":7}')`,
		`PRAGMA user_version = 4`} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Jobs(ctx, JobQuery{Name: "train", States: []api.State{api.StateCompleted}, Until: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)})
	if err != nil || len(got) != 1 {
		t.Fatalf("the old job by name and time: %v %v", ids(got), err)
	}
	if u, _ := s.EndedSummary(ctx); len(u) != 1 || u[0].GPUSeconds != 7 || u[0].Jobs != 1 || !u[0].Hour.Equal(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("the old job's usage: %+v", u)
	}
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("version %d %v", v, err)
	}
}
