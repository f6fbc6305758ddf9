package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// doneArrayStore commits two arrays: jd, whose three tasks ended
// (completed, failed, canceled, a minute apart), marked done with them;
// and jl, not done: task 0 completed, task 1 never changed (no row).
func doneArrayStore(t *testing.T, path string) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id string, n int) ArrayRecord {
		r := ArrayRecord{Array: api.Array{ID: id, User: "ana", Project: "p", Array: "0-2", TaskCount: n, Priority: api.PriorityNormal},
			Template: api.Job{User: "ana", Priority: api.PriorityNormal}}
		for i := range n {
			r.Array.Tasks = append(r.Array.Tasks, i)
		}
		return r
	}
	task := func(id string, i int, st api.State, end time.Time) api.Job {
		start := base
		return api.Job{ID: id + "_" + string(rune('0'+i)), ArrayJobID: id, ArrayTaskID: &i, User: "ana", Project: "p", Priority: api.PriorityNormal,
			State: st, SubmittedAt: base, StartedAt: &start, FinishedAt: &end, GPUSeconds: 60}
	}
	b := &Batch{}
	for i, st := range []api.State{api.StateCompleted, api.StateFailed, api.StateCanceled} {
		j := task("jd", i, st, base.Add(time.Duration(3-i)*time.Minute)) // the canceled one ended first
		b.Jobs = append(b.Jobs, j)
		b.Ended = append(b.Ended, EndedJob{User: "ana", Project: "p", State: st, FinishedAt: *j.FinishedAt, GPUSeconds: 60})
	}
	done := rec("jd", 3)
	done.Finished = base.Add(3 * time.Minute)
	b.Arrays = append(b.Arrays, done, rec("jl", 2))
	b.Jobs = append(b.Jobs, task("jl", 0, api.StateCompleted, base))
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	return s
}

// A done array is not loaded, and is read whole from the store: its
// record and counts, the task that ended first in some states, and its id
// (not its tasks') for a dependency's prefix.
func TestDoneArrays(t *testing.T) {
	ctx := context.Background()
	s := doneArrayStore(t, filepath.Join(t.TempDir(), "corral.db"))
	defer s.Close()
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(st.Jobs); !slices.Equal(got, []string{"jl_0"}) {
		t.Errorf("loaded jobs %v, want [jl_0]: none of the done array's", got)
	}
	if len(st.Arrays) != 1 || st.Arrays[0].Array.ID != "jl" {
		t.Errorf("loaded arrays %+v, want jl only", st.Arrays)
	}
	for _, tc := range []struct {
		id   string
		want api.ArrayCounts
		done bool
	}{
		{"jd", api.ArrayCounts{Completed: 1, Failed: 1, Canceled: 1}, true},
		{"jl", api.ArrayCounts{Completed: 1, Queued: 1}, false},
	} {
		r, err := s.Array(ctx, tc.id)
		if err != nil || r.Array.Counts != tc.want || r.Finished.IsZero() == tc.done || len(r.Array.Tasks) != r.Array.TaskCount {
			t.Errorf("Array(%s) = %+v, %v: want counts %+v, done %v", tc.id, r, err, tc.want, tc.done)
		}
	}
	if _, err := s.Array(ctx, "jx"); !errors.Is(err, ErrNoArray) {
		t.Errorf("Array(jx) = %v, want ErrNoArray", err)
	}
	for _, tc := range []struct {
		states []api.State
		want   string
	}{
		{[]api.State{api.StateFailed, api.StateCanceled}, "jd_2"},
		{[]api.State{api.StateFailed}, "jd_1"},
		{[]api.State{api.StateCompleted}, "jd_0"},
	} {
		if j, err := s.FirstEnded(ctx, "jd", tc.states...); err != nil || j.ID != tc.want {
			t.Errorf("FirstEnded(jd, %v) = %s, %v; want %s", tc.states, j.ID, err, tc.want)
		}
	}
	if _, err := s.FirstEnded(ctx, "jl", api.StateFailed); !errors.Is(err, ErrNoJob) {
		t.Errorf("FirstEnded(jl, failed) = %v, want ErrNoJob", err)
	}
	for prefix, want := range map[string][]string{"j": {"jd", "jl"}, "jd": {"jd"}, "jd_": {"jd_0", "jd_1", "jd_2"}} {
		if got, err := s.DependencyIDs(ctx, prefix, 10); err != nil || !slices.Equal(got, want) {
			t.Errorf("DependencyIDs(%s) = %v, %v; want %v", prefix, got, err, want)
		}
	}
	if got, _ := s.ArrayIDsWithPrefix(ctx, "j", 10); !slices.Equal(got, []string{"jd", "jl"}) {
		t.Errorf("ArrayIDsWithPrefix(j) = %v", got)
	}
}

// A store written before version 6 (no arrays.finished, array tasks out
// of the summary of ended jobs) gets the column when it is opened: the
// arrays whose tasks all ended are marked done, their tasks counted in
// the summary, once.
func TestMigrateArraysDone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s := doneArrayStore(t, path)
	for _, q := range []string{`DROP INDEX arrays_by_finished`, `DROP INDEX jobs_by_array`, `ALTER TABLE arrays DROP COLUMN finished`,
		`DELETE FROM job_usage`, `PRAGMA user_version = 5`} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	for range 2 { // the second open changes nothing
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Arrays) != 1 || st.Arrays[0].Array.ID != "jl" || !slices.Equal(ids(st.Jobs), []string{"jl_0"}) {
			t.Errorf("loaded %v and arrays %d: want jl and its task only", ids(st.Jobs), len(st.Arrays))
		}
		n, err := s.CountFinished(ctx)
		if err != nil || n[api.StateCompleted] != 1 || n[api.StateFailed] != 1 || n[api.StateCanceled] != 1 {
			t.Errorf("counts %v, %v: want jd's three tasks, once", n, err)
		}
		r, err := s.Array(ctx, "jd")
		if err != nil || !r.Finished.Equal(time.Date(2026, 1, 1, 0, 3, 0, 0, time.UTC)) {
			t.Errorf("jd finished %v, %v: want its last task's end", r.Finished, err)
		}
		s.Close()
	}
}
