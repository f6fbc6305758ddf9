package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// The reads of what the orchestrator's memory does not hold, with the
// SQL stores' orders and limits.

// Job returns one job with its events (an array task's with its array's
// submission event first); store.ErrNoJob when there is none.
func (s *Store) Job(ctx context.Context, id string) (api.Job, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.jobs[id]
	if !ok {
		return api.Job{}, fmt.Errorf("job %s: %w", id, store.ErrNoJob)
	}
	j := clone(r.job)
	j.Events = slices.Clone(s.events[id])
	if j.ArrayJobID != "" && (len(j.Events) == 0 || j.Events[0].From != "") {
		sub := api.Event{At: j.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}
		j.Events = append([]api.Event{sub}, j.Events...)
	}
	return j, nil
}

// JobsPage returns the jobs q selects, newest (largest id) first, without
// their events, and whether the page stopped at q.MaxBytes.
func (s *Store) JobsPage(ctx context.Context, q store.JobQuery) ([]api.Job, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if q.Limit <= 0 {
		q.Limit = 100
	}
	ids := make([]string, 0, len(s.jobs))
	for id, r := range s.jobs {
		if matches(r, q) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	out := []api.Job{}
	var size int64
	for _, id := range ids {
		if len(out) == q.Limit {
			break
		}
		if q.MaxBytes > 0 && size > q.MaxBytes {
			return out, true, nil
		}
		data, err := json.Marshal(s.jobs[id].job)
		if err != nil {
			return nil, false, fmt.Errorf("jobs: %w", err)
		}
		size += int64(len(data))
		out = append(out, clone(s.jobs[id].job))
	}
	return out, false, nil
}

// matches reports whether a job row is one q selects.
func matches(r *jobRow, q store.JobQuery) bool {
	j := &r.job
	switch {
	case len(q.States) > 0 && !slices.Contains(q.States, j.State),
		q.User != "" && j.User != q.User,
		q.Project != "" && j.Project != q.Project,
		q.Name != "" && j.Name != q.Name,
		!q.Since.IsZero() && j.SubmittedAt.UnixNano() < q.Since.UnixNano(),
		!q.Until.IsZero() && j.SubmittedAt.UnixNano() >= q.Until.UnixNano(),
		q.Before != "" && j.ID >= q.Before,
		len(q.SkipArrays) > 0 && slices.Contains(q.SkipArrays, j.ArrayJobID):
		return false
	}
	return true
}

// FirstEnded returns, without its events, the task of array id in one of
// states that ended first (ties: the smaller id); store.ErrNoJob when
// none is.
func (s *Store) FirstEnded(ctx context.Context, id string, states ...api.State) (api.Job, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best *jobRow
	for _, r := range s.jobs {
		if id == "" || r.job.ArrayJobID != id || !slices.Contains(states, r.job.State) {
			continue
		}
		if best == nil || r.finished < best.finished || r.finished == best.finished && r.job.ID < best.job.ID {
			best = r
		}
	}
	if best == nil {
		return api.Job{}, fmt.Errorf("array %s: %w", id, store.ErrNoJob)
	}
	return clone(best.job), nil
}

// EndedSummary reads the summary of ended jobs by user, then hour,
// newest first.
func (s *Store) EndedSummary(ctx context.Context) ([]store.UsageRow, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []store.UsageRow
	for _, r := range s.ended {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b store.UsageRow) int {
		if c := strings.Compare(a.User, b.User); c != 0 {
			return c
		}
		if c := b.Hour.Compare(a.Hour); c != 0 {
			return c
		}
		// Rows of one user and hour: an order of their own, so that a
		// test sees the same one each time.
		return strings.Compare(a.Project+"\x00"+string(a.State), b.Project+"\x00"+string(b.State))
	})
	return out, nil
}

// Array returns the record of job array id, done or not, with its counts
// by state read from its tasks' rows (a task without one is queued);
// store.ErrNoArray when there is none.
func (s *Store) Array(ctx context.Context, id string) (store.ArrayRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.arrays[id]
	if !ok {
		return store.ArrayRecord{}, fmt.Errorf("array %s: %w", id, store.ErrNoArray)
	}
	rec := clone(a)
	rec.Finished = a.Finished
	rowed := 0
	for _, r := range s.jobs {
		if id != "" && r.job.ArrayJobID == id {
			rec.Array.Counts.Add(r.job.State, 1)
			rowed++
		}
	}
	rec.Array.Counts.Queued += max(len(rec.Array.Tasks)-rowed, 0)
	return rec, nil
}

// IdempotentJob returns the id of the job submitted under key, and
// whether there is one.
func (s *Store) IdempotentJob(ctx context.Context, key string) (string, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.idem[key]
	return id, ok, nil
}

// NumberID returns the id of the job or array that has number n, and
// whether there is one.
func (s *Store) NumberID(ctx context.Context, n int64) (string, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.numbers[n]
	return id, ok, nil
}

// NamedJobs returns up to limit of user's jobs and arrays whose name is
// name (an array once, by its id), newest first, with their numbers.
func (s *Store) NamedJobs(ctx context.Context, user, name string, limit int) ([]store.Named, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	byID := map[string]store.Named{}
	for _, r := range s.jobs {
		if r.job.Name != name || r.job.User != user {
			continue
		}
		x := store.Named{ID: r.job.ID}
		if r.job.ArrayJobID != "" {
			x = store.Named{ID: r.job.ArrayJobID, Array: true}
		}
		x.Number = s.numberOf[x.ID]
		byID[x.ID] = x
	}
	keys := sortedKeys(byID)
	slices.Reverse(keys)
	var out []store.Named
	for _, k := range keys[:min(len(keys), max(limit, 0))] {
		out = append(out, byID[k])
	}
	return out, nil
}

// JobIDsWithPrefix returns up to limit ids of jobs that start with
// prefix, in id order.
func (s *Store) JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return withPrefix(s.jobs, prefix, limit, nil), nil
}

// ArrayIDsWithPrefix returns up to limit ids of arrays, done or not,
// that start with prefix, in id order.
func (s *Store) ArrayIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return withPrefix(s.arrays, prefix, limit, nil), nil
}

// DependencyIDs returns up to limit ids, in order, that a dependency
// naming prefix may mean: arrays whose ids start with it, and jobs whose
// ids start with it other than the tasks of those arrays.
func (s *Store) DependencyIDs(ctx context.Context, prefix string, limit int) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	jobs := withPrefix(s.jobs, prefix, -1, func(r *jobRow) bool { return !strings.HasPrefix(r.job.ArrayJobID, prefix) })
	ids := append(jobs, withPrefix(s.arrays, prefix, -1, nil)...)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return ids[:min(len(ids), max(limit, 0))], nil
}

// withPrefix is up to limit (negative: all) keys of m that start with
// prefix and that keep (nil: all) keeps, in order.
func withPrefix[V any](m map[string]V, prefix string, limit int, keep func(V) bool) []string {
	var ids []string
	for id, v := range m {
		if strings.HasPrefix(id, prefix) && (keep == nil || keep(v)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if limit >= 0 {
		ids = ids[:min(len(ids), limit)]
	}
	return ids
}

// UsageRecords returns the ledger rows that overlap [since, until) (a
// zero bound is open), in the order they ended.
func (s *Store) UsageRecords(ctx context.Context, since, until time.Time) ([]usage.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []usage.Record{}
	for _, r := range s.usage {
		if (since.IsZero() || r.End.UnixNano() >= since.UnixNano()) && (until.IsZero() || r.Start.UnixNano() < until.UnixNano()) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b usage.Record) int {
		if c := a.End.Compare(b.End); c != 0 {
			return c
		}
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		if a.Attempt != b.Attempt {
			return a.Attempt - b.Attempt
		}
		return strings.Compare(a.Node, b.Node)
	})
	return out, nil
}

// UsageTotals sums the whole ledger by user, project and GPU model.
func (s *Store) UsageTotals(ctx context.Context) ([]store.UsageTotal, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	type key struct{ user, project, model string }
	sums := map[key]float64{}
	for _, r := range s.usage {
		sums[key{r.User, r.Project, r.GPUModel}] += r.GPUSeconds
	}
	var out []store.UsageTotal
	for k, v := range sums {
		out = append(out, store.UsageTotal{User: k.user, Project: k.project, GPUModel: k.model, GPUSeconds: v})
	}
	slices.SortFunc(out, func(a, b store.UsageTotal) int {
		return strings.Compare(a.User+"\x00"+a.Project+"\x00"+a.GPUModel, b.User+"\x00"+b.Project+"\x00"+b.GPUModel)
	})
	return out, nil
}

// PutHistory stores a sample taken at at and drops those taken before
// dropBefore.
func (s *Store) PutHistory(ctx context.Context, at time.Time, data []byte, dropBefore time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history[at.UnixNano()] = slices.Clone(data)
	for t := range s.history {
		if t < dropBefore.UnixNano() {
			delete(s.history, t)
		}
	}
	return nil
}

// History returns the samples taken at or after since, oldest first.
func (s *Store) History(ctx context.Context, since time.Time) ([]store.HistoryRow, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []store.HistoryRow
	for t, data := range s.history {
		if t >= since.UnixNano() {
			out = append(out, store.HistoryRow{At: time.Unix(0, t).UTC(), Data: slices.Clone(data)})
		}
	}
	slices.SortFunc(out, func(a, b store.HistoryRow) int { return a.At.Compare(b.At) })
	return out, nil
}
