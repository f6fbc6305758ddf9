package memstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// PruneFinished deletes up to limit finished jobs that are not array
// tasks and finished before before, other than those keep names, with
// their events, idempotency keys and numbers (but the largest number),
// takes them out of the summary of ended jobs, and returns them.
func (s *Store) PruneFinished(ctx context.Context, before time.Time, limit int, keep []string) ([]store.PrunedJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []*jobRow
	for _, id := range sortedKeys(s.jobs) {
		r := s.jobs[id]
		if len(gone) == limit {
			break
		}
		if r.finished > 0 && r.finished < before.UnixNano() && r.job.ArrayJobID == "" && !slices.Contains(keep, id) {
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	return s.drop(gone), nil
}

// PruneDoneArrays deletes up to limit done job arrays whose last task
// ended before before, other than those keep names, each with all its
// tasks, and returns the tasks and the arrays.
func (s *Store) PruneDoneArrays(ctx context.Context, before time.Time, limit int, keep []string) ([]store.PrunedJob, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var arrays []string
	for _, id := range sortedKeys(s.arrays) {
		f := s.arrays[id].Finished
		if !f.IsZero() && f.UnixNano() < before.UnixNano() && !slices.Contains(keep, id) {
			arrays = append(arrays, id)
		}
	}
	// The oldest done first, as the SQL stores read them.
	slices.SortStableFunc(arrays, func(a, b string) int { return s.arrays[a].Finished.Compare(s.arrays[b].Finished) })
	arrays = arrays[:min(len(arrays), limit)]
	if len(arrays) == 0 {
		return nil, nil, nil
	}
	var tasks []*jobRow
	for _, id := range sortedKeys(s.jobs) {
		if r := s.jobs[id]; r.job.ArrayJobID != "" && slices.Contains(arrays, r.job.ArrayJobID) {
			tasks = append(tasks, r)
		}
	}
	out := s.drop(tasks)
	for _, id := range arrays {
		delete(s.arrays, id)
	}
	s.dropNumbers(arrays)
	return out, arrays, nil
}

// drop deletes jobs' rows, events, keys and numbers and takes them out
// of the summary of ended jobs.
func (s *Store) drop(rows []*jobRow) []store.PrunedJob {
	var out []store.PrunedJob
	var ended []store.EndedJob
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		j := r.job
		out = append(out, store.PrunedJob{ID: j.ID, State: j.State})
		e := store.EndedJob{User: j.User, Project: j.Project, State: j.State, FinishedAt: time.Unix(0, r.finished).UTC(), GPUSeconds: j.GPUSeconds}
		if j.State == api.StateCompleted && j.StartedAt != nil && !j.StartedAt.IsZero() {
			e.RunSeconds = float64(r.finished-j.StartedAt.UnixNano()) / 1e9
		}
		ended = append(ended, e)
		ids = append(ids, j.ID)
		delete(s.jobs, j.ID)
		delete(s.events, j.ID)
	}
	for k, id := range s.idem {
		if slices.Contains(ids, id) {
			delete(s.idem, k)
		}
	}
	s.dropNumbers(ids)
	s.summarize(ended, -1)
	return out
}

// dropNumbers deletes the numbers of ids, but for the largest number
// there is: start-up goes on from it.
func (s *Store) dropNumbers(ids []string) {
	var top int64
	for n := range s.numbers {
		top = max(top, n)
	}
	for _, id := range ids {
		if n, ok := s.numberOf[id]; ok && n < top {
			delete(s.numbers, n)
			delete(s.numberOf, id)
		}
	}
}

// recentRuns returns the n most recent runs, oldest first, as the SQL
// stores' Load does (by end, then job id and attempt). s.mu held.
func (s *Store) recentRuns(n int) []store.RunRow {
	runs := make([]store.RunRow, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b store.RunRow) int {
		if c := a.EndedAt.Compare(b.EndedAt); c != 0 {
			return c
		}
		if c := strings.Compare(a.JobID, b.JobID); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
	return runs[max(len(runs)-n, 0):]
}

// PruneRuns deletes, oldest first and at most limit of them, the runs
// that ended before before and are not among the keep most recent, and
// returns how many it deleted.
func (s *Store) PruneRuns(ctx context.Context, before time.Time, keep, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.recentRuns(len(s.runs))
	if len(all) < keep {
		return 0, nil
	}
	bound := before
	if keep > 0 && all[len(all)-keep].EndedAt.Before(bound) {
		bound = all[len(all)-keep].EndedAt
	}
	n := 0
	for _, r := range all {
		if n == limit || !r.EndedAt.Before(bound) {
			break
		}
		delete(s.runs, runKey{r.JobID, r.Attempt})
		n++
	}
	return n, nil
}
