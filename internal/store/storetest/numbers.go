package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// testNumbers: short numbers commit with their jobs, each
// number and each id once (a batch giving either again fails whole and
// changes nothing), survive a reopen, name jobs and arrays, and the
// largest survives pruning, so that numbers keep growing.
func testNumbers(t *testing.T, o Opener) {
	ctx := context.Background()
	s := open(t, o)
	job := func(id, user, name string, n int64, st api.State) api.Job {
		j := api.Job{ID: id, Number: n, User: user, Name: name, State: st, Priority: api.PriorityNormal, SubmittedAt: at}
		if st.Terminal() {
			end := at.Add(time.Minute)
			j.FinishedAt = &end
		}
		return j
	}
	task := func(array string, i int, name string, n int64) api.Job {
		j := job(fmt.Sprintf("%s_%d", array, i), "ana", name, n, api.StateRunning)
		j.ArrayJobID, j.ArrayTaskID = array, &i
		return j
	}
	rec := store.ArrayRecord{Array: api.Array{ID: "j3", Number: 3, Name: "sweep", User: "ana", Array: "0-1", Tasks: []int{0, 1}, Priority: api.PriorityNormal},
		Template: api.Job{Name: "sweep", Number: 3, Priority: api.PriorityNormal}}
	b := &store.Batch{
		Jobs: []api.Job{job("j1", "ana", "eval", 1, api.StateCompleted), job("j2", "bo", "eval", 2, api.StateQueued),
			task("j3", 0, "sweep", 3), task("j3", 1, "sweep", 3)},
		Arrays:  []store.ArrayRecord{rec},
		Numbers: []store.NumberRow{{Number: 1, ID: "j1"}, {Number: 2, ID: "j2"}, {Number: 3, ID: "j3"}},
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rows []store.NumberRow
	}{
		{"a number given before", []store.NumberRow{{Number: 4, ID: "j4"}, {Number: 2, ID: "j5"}}},
		{"an id numbered before", []store.NumberRow{{Number: 4, ID: "j4"}, {Number: 5, ID: "j1"}}},
		{"a number given twice in one batch", []store.NumberRow{{Number: 4, ID: "j4"}, {Number: 4, ID: "j5"}}},
		{"no number", []store.NumberRow{{Number: 0, ID: "j4"}}},
	} {
		err := s.Commit(ctx, &store.Batch{Jobs: []api.Job{job("j4", "ana", "x", 4, api.StateQueued)}, Numbers: c.rows})
		if err == nil || !store.Permanent(err) {
			t.Fatalf("%s: Commit = %v; want a permanent error", c.name, err)
		}
		if _, found, err := s.NumberID(ctx, 4); err != nil || found {
			t.Fatalf("%s: NumberID(4) found %v, %v after a failed batch; want nothing written", c.name, found, err)
		}
	}
	s.Close()
	s = open(t, o)
	st, err := s.Load(ctx)
	if err != nil || st.MaxNumber != 3 {
		t.Fatalf("Load after reopen: MaxNumber %d, %v; want 3", st.MaxNumber, err)
	}
	for n, want := range map[int64]string{1: "j1", 2: "j2", 3: "j3", 4: ""} {
		id, found, err := s.NumberID(ctx, n)
		if err != nil || id != want || found != (want != "") {
			t.Fatalf("NumberID(%d) = %q, %v, %v; want %q", n, id, found, err, want)
		}
	}
	for _, c := range []struct {
		user, name string
		want       []store.Named
	}{
		{"ana", "eval", []store.Named{{ID: "j1", Number: 1}}},
		{"bo", "eval", []store.Named{{ID: "j2", Number: 2}}},
		{"ana", "sweep", []store.Named{{ID: "j3", Number: 3, Array: true}}},
		{"bo", "sweep", nil},
		{"ana", "none", nil},
	} {
		got, err := s.NamedJobs(ctx, c.user, c.name, 5)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("NamedJobs(%s, %s) = %+v, %v; want %+v", c.user, c.name, got, err, c.want)
		}
	}

	// j1 (number 1) and j6, the largest number, end and are pruned: 1 is
	// gone, 6 stays the largest, for the next start-up.
	if err := s.Commit(ctx, &store.Batch{Jobs: []api.Job{job("j6", "ana", "last", 6, api.StateFailed)}, Numbers: []store.NumberRow{{Number: 6, ID: "j6"}}}); err != nil {
		t.Fatal(err)
	}
	if pruned, err := s.PruneFinished(ctx, at.Add(time.Hour), 10, nil); err != nil || len(pruned) != 2 {
		t.Fatalf("PruneFinished = %v, %v; want j1 and j6", pruned, err)
	}
	if _, found, err := s.NumberID(ctx, 1); err != nil || found {
		t.Fatalf("NumberID(1) after pruning j1: found %v, %v", found, err)
	}
	s.Close()
	s = open(t, o)
	if st, err = s.Load(ctx); err != nil || st.MaxNumber != 6 {
		t.Fatalf("Load after pruning: MaxNumber %d, %v; want 6", st.MaxNumber, err)
	}
}
