package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A job that ends leaves memory (o.jobs) once that is committed; the views
// still read it (from the recent ring, then from the store after a
// restart), and changes asked of it are refused as before (409).
func TestFinishedJobsLeaveMemory(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	done := h.submit(api.SubmitRequest{Command: "a", GPUCount: gpus(1), User: "ana", Name: "first"})
	h.finish(h.nextStart())
	h.o.mu.RLock()
	inMemory := h.o.jobs.Get(done.ID) != nil
	h.o.mu.RUnlock()
	if inMemory {
		t.Fatal("the completed job is still in o.jobs")
	}
	h.o.SetScheduling(ctx, false) // the next job stays queued, across the restart too
	live := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(1), User: "ana", Name: "waits"})

	check := func(when string) {
		t.Helper()
		j, err := h.o.Job(done.ID)
		if err != nil || j.State != api.StateCompleted || len(j.Events) != 5 {
			t.Fatalf("%s: Job = %s with %d events, %v: want it completed with its 5 events", when, j.State, len(j.Events), err)
		}
		if st, _, ok := h.o.JobState(done.ID); !ok || st != api.StateCompleted {
			t.Fatalf("%s: JobState = %s %v", when, st, ok)
		}
		if _, _, err := h.o.Cancel(ctx, done.ID, 0); !isStatus(err, 409) {
			t.Fatalf("%s: cancel of the ended job = %v, want 409", when, err)
		}
		// 20 characters: past the id's 10 of time, which the live job,
		// submitted in the same millisecond, may share.
		if id, err := h.o.FeatureOps().Refs.JobID(done.ID[:20]); err != nil || id != done.ID {
			t.Fatalf("%s: the ended job's prefix resolves to %q, %v", when, id, err)
		}
		jobs, next, err := h.o.JobPage(ctx, JobFilter{User: "ana"})
		if err != nil || !slices.Equal(jobIDs(jobs), []string{live.ID, done.ID}) || next != "" {
			t.Fatalf("%s: GET /jobs = %v next %q %v: want the live job, then the ended one", when, jobIDs(jobs), next, err)
		}
		if c := h.o.JobStateCounts(); c[api.StateCompleted] != 1 || c[api.StateQueued] != 1 {
			t.Fatalf("%s: state counts %v", when, c)
		}
	}
	check("at once")

	h.stop()
	h2 := start(t, h.path, nil)
	h.stop = nil
	h = h2
	h.o.mu.RLock()
	n := h.o.jobs.Len()
	h.o.mu.RUnlock()
	if n != 1 {
		t.Fatalf("start-up loaded %d jobs, want 1 (the queued one)", n)
	}
	check("after a restart")
}

// A job submitted with afterok on a job that ended before the restart
// reads the predecessor's final state from the store: met for a
// completed one, never for a failed one.
func TestDependencyOnEndedJob(t *testing.T) {
	h := start(t, "", nil)
	ok := h.submit(api.SubmitRequest{Command: "ok", GPUCount: gpus(1)})
	h.finish(h.nextStart())
	bad := h.submit(api.SubmitRequest{Command: "bad", GPUCount: gpus(1)})
	h.run(h.nextStart().JobID, 3, time.Now())
	h.waitState(bad.ID, api.StateFailed)
	h.stop()
	h2 := start(t, h.path, nil)
	h.stop = nil
	h = h2

	after := h.submit(api.SubmitRequest{Command: "next", GPUCount: gpus(1), DependsOn: "afterok:" + ok.ID[:12]})
	if task := h.nextStart(); task.JobID != after.ID {
		t.Fatalf("started %s, want the job after the completed one", task.JobID)
	}
	never := h.submit(api.SubmitRequest{Command: "never", GPUCount: gpus(1), DependsOn: "afterok:" + bad.ID})
	h.waitPending(never.ID, api.ReasonDependencyNeverSatisfied)
}

// GET /jobs pages through live and ended jobs together, newest first,
// with no job twice or missed, all of them and one user's, whether the
// jobs in memory are walked in id order (stopping at a full page) or, when
// that order is broken (a clock step back), read whole and sorted.
func TestJobPages(t *testing.T) {
	for _, unsorted := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderUnsorted=%v", unsorted), func(t *testing.T) {
			h := start(t, "", nil)
			ctx := context.Background()
			if unsorted { // a job whose id is later than any to come, gone: the next id breaks the order
				h.o.mu.Lock()
				h.o.jobs.Add(&api.Job{ID: "jzzzzzzzzzzzzzzzzzzzzzzzzzz"})
				h.o.jobs.Remove("jzzzzzzzzzzzzzzzzzzzzzzzzzz")
				h.o.mu.Unlock()
			}
			var want, wantBo []string
			for i := range 11 {
				user := []string{"ana", "bo"}[i%2]
				j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), User: user})
				if i%3 == 0 {
					h.finish(h.nextStart())
				}
				want = append([]string{j.ID}, want...)
				if user == "bo" {
					wantBo = append([]string{j.ID}, wantBo...)
				}
			}
			pages := func(f JobFilter) []string {
				var got []string
				for n := 0; ; n++ {
					jobs, next, err := h.o.JobPage(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, jobIDs(jobs)...)
					if next == "" || n > 10 {
						return got
					}
					f.Cursor = next
				}
			}
			if got := pages(JobFilter{Limit: 3}); !slices.Equal(got, want) {
				t.Errorf("pages gave %v, want %v", got, want)
			}
			if got := pages(JobFilter{Limit: 2, User: "bo"}); !slices.Equal(got, wantBo) {
				t.Errorf("bo's pages gave %v, want %v", got, wantBo)
			}
			ended, _, _ := h.o.JobPage(ctx, JobFilter{State: api.StateCompleted})
			if len(ended) != 4 {
				t.Errorf("state=completed gave %d jobs, want 4", len(ended))
			}
		})
	}
}

func jobIDs(jobs []api.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func isStatus(err error, status int) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == status
}

// PruneOnce deletes the jobs that ended before the time, with their logs,
// and the counts follow; live jobs stay.
func TestPruneOnce(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	old := h.submit(api.SubmitRequest{Command: "a", GPUCount: gpus(1)})
	h.finish(h.nextStart())
	logDir := filepath.Join(h.o.cfg.DataDir, "logs", old.ID)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	h.o.SetScheduling(ctx, false)
	live := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(1)})
	if n, err := h.o.PruneOnce(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruning what ended before an hour ago deleted %d, %v: want none", n, err)
	}
	if n, err := h.o.PruneOnce(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v: want the one ended job", n, err)
	}
	h.o.mu.Lock()
	h.o.gone.Forget(old.ID) // as after a restart
	h.o.mu.Unlock()
	if _, err := h.o.Job(old.ID); !isStatus(err, 404) {
		t.Fatalf("the pruned job: %v, want 404", err)
	}
	if _, err := os.Stat(logDir); !os.IsNotExist(err) {
		t.Fatalf("its logs: %v, want them gone", err)
	}
	if _, err := h.o.Job(live.ID); err != nil {
		t.Fatal(err)
	}
	if c := h.o.JobStateCounts(); c[api.StateCompleted] != 0 {
		t.Fatalf("counts after pruning: %v", c)
	}
}
