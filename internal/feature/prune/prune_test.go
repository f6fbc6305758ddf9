package prune

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// fakeBooks keeps what waiting jobs depend on and what was forgotten.
type fakeBooks struct {
	keep      []string
	forgotten []string
}

func (b *fakeBooks) DependedOn() []string { return b.keep }
func (b *fakeBooks) Forget(gone []store.PrunedJob) {
	for _, g := range gone {
		b.forgotten = append(b.forgotten, g.ID)
	}
}

var at = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// ended is a plain job, or a task of array, that ended min minutes after at.
func ended(id, array string, min int) api.Job {
	fin := at.Add(time.Duration(min) * time.Minute)
	j := api.Job{ID: id, User: "ana", State: api.StateCompleted, Priority: api.PriorityNormal, SubmittedAt: at, FinishedAt: &fin, ArrayJobID: array}
	if array != "" {
		i := 0
		j.ArrayTaskID = &i
	}
	return j
}

// TestOnce: jobs that ended before the time go, with their logs, but for
// those waiting jobs depend on; a done array goes whole, and one whose
// task is depended on stays whole.
func TestOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keep       []string
		before     int // minutes after at
		wantN      int
		wantGone   string
		wantStored string
	}{
		{"nothing old enough", nil, 5, 0, "", "a1_0 a2_0 j1 j2 j3"},
		{"all", nil, 60, 5, "a1_0 a2_0 j1 j2 j3", ""},
		{"some", nil, 25, 2, "j1 j2", "a1_0 a2_0 j3"},
		{"kept by a dependency", []string{"j1", "a1_0"}, 60, 3, "a2_0 j2 j3", "a1_0 j1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			a1 := store.ArrayRecord{Array: api.Array{ID: "a1", Tasks: []int{0}, Priority: api.PriorityNormal}, Template: api.Job{Priority: api.PriorityNormal}, Finished: at.Add(30 * time.Minute)}
			a2 := a1
			a2.Array.ID, a2.Finished = "a2", at.Add(40*time.Minute)
			err := st.Commit(ctx, &store.Batch{
				Jobs:   []api.Job{ended("j1", "", 10), ended("j2", "", 20), ended("j3", "", 30), ended("a1_0", "a1", 30), ended("a2_0", "a2", 40)},
				Arrays: []store.ArrayRecord{a1, a2},
			})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for _, id := range []string{"j1", "j2", "j3"} {
				if err := os.MkdirAll(filepath.Join(dir, "logs", id), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			books := &fakeBooks{keep: tc.keep}
			p := Pruner{Store: st, Books: books, DataDir: dir, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }}
			n, err := p.Once(ctx, at.Add(time.Duration(tc.before)*time.Minute))
			if err != nil || n != tc.wantN {
				t.Fatalf("Once = %d, %v; want %d", n, err, tc.wantN)
			}
			slices.Sort(books.forgotten)
			if got := strings.Join(books.forgotten, " "); got != tc.wantGone {
				t.Errorf("forgotten %q, want %q", got, tc.wantGone)
			}
			var stored []string
			for _, id := range []string{"a1_0", "a2_0", "j1", "j2", "j3"} {
				if _, err := st.Job(ctx, id); err == nil {
					stored = append(stored, id)
				}
				_, err := os.Stat(filepath.Join(dir, "logs", id))
				if id[0] == 'j' && (err == nil) != slices.Contains(stored, id) {
					t.Errorf("%s's logs: %v, while stored: %v", id, err, slices.Contains(stored, id))
				}
			}
			if got := strings.Join(stored, " "); got != tc.wantStored {
				t.Errorf("stored %q, want %q", got, tc.wantStored)
			}
		})
	}
}

// TestOnceWaitsWhenTooManyAreKept: more kept ids than one query can leave
// out is an error, and nothing is deleted.
func TestOnceWaitsWhenTooManyAreKept(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if err := st.Commit(ctx, &store.Batch{Jobs: []api.Job{ended("j1", "", 1)}}); err != nil {
		t.Fatal(err)
	}
	keep := make([]string, maxKeep+1)
	for i := range keep {
		keep[i] = fmt.Sprint("k", i)
	}
	p := Pruner{Store: st, Books: &fakeBooks{keep: keep}, Log: slog.New(slog.DiscardHandler)}
	if n, err := p.Once(ctx, at.Add(time.Hour)); err == nil || n != 0 {
		t.Fatalf("Once = %d, %v: want an error", n, err)
	}
	if _, err := st.Job(ctx, "j1"); err != nil {
		t.Fatalf("j1 was deleted: %v", err)
	}
}

// TestOncePrunesRuns: the runs that ended before the time go, in
// batches, but for the KeepRuns most recent.
func TestOncePrunesRuns(t *testing.T) {
	total := KeepRuns + Batch + 7 // more than one batch beyond what is kept
	for _, tc := range []struct {
		name   string
		before time.Duration // after at; run i ended at at+i seconds
		left   int
	}{
		{"the oldest 100", 100 * time.Second, total - 100},
		{"all but those kept", 1000 * time.Hour, KeepRuns},
		{"none", 0, total},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			var b store.Batch
			for i := range total {
				b.Runs = append(b.Runs, store.RunRow{JobID: fmt.Sprintf("r%06d", i), User: "ana", Project: "p", Name: "sweep", CommandFP: "fp",
					GPUs: 1, Ran: time.Minute, EndedAt: at.Add(time.Duration(i) * time.Second), Outcome: "exited"})
			}
			if err := st.Commit(ctx, &b); err != nil {
				t.Fatal(err)
			}
			p := Pruner{Store: st, Books: &fakeBooks{}, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }}
			if _, err := p.Once(ctx, at.Add(tc.before)); err != nil {
				t.Fatal(err)
			}
			// What is left, counted by deleting it all.
			if n, err := st.PruneRuns(ctx, at.Add(10000*time.Hour), 0, 2*total); err != nil || n != tc.left {
				t.Fatalf("runs left: %d, %v; want %d", n, err, tc.left)
			}
		})
	}
}
