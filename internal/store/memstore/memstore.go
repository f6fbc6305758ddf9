// Package memstore is a store held in memory: the store.Log the
// orchestrator commits its batches to and loads its state from, with the
// reads of what the orchestrator's memory no longer holds (ended jobs,
// done arrays, idempotency keys, numbers and names, the usage ledger,
// the summary of ended jobs, pruning, history samples).
//
// It exists so that the loop and the feature packages can be tested
// without a database: no files, no fsync, nothing to clean up. It keeps
// the rules of the SQL stores that a caller can see (a batch is all or
// nothing; a number, an id's number or an idempotency key given twice
// fails the batch as store.Permanent does; rows round-trip through JSON
// exactly as the SQL stores write them) and the conformance suite
// (storetest.RunLog) holds it to the same expectations as SQLite. It is
// not durable and not meant for production.
package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// Store is an in-memory store. The zero value is not usable; call New.
// It is safe for concurrent use.
type Store struct {
	mu       sync.RWMutex
	jobs     map[string]*jobRow
	events   map[string][]api.Event
	holds    map[string]api.Hold
	idem     map[string]string // key -> job id
	settings map[string]string
	nodes    map[string]string
	outbox   []store.OutboxItem
	audit    []api.AuditEntry
	arrays   map[string]store.ArrayRecord
	bookings map[string]api.Reservation
	usage    map[usageKey]usage.Record
	ended    map[endedKey]*store.UsageRow
	numbers  map[int64]string
	numberOf map[string]int64
	history  map[int64][]byte
	runs     map[runKey]store.RunRow
	// fail, when set, is what Commit returns instead of writing (a
	// store that is down, for tests of the loop's retries).
	fail error
}

// jobRow is a job as the jobs table holds it: the row's JSON without
// events, and the columns the queries test.
type jobRow struct {
	job      api.Job
	finished int64 // nanoseconds; 1 for a job ended at an unknown time; 0 while live
}

type usageKey struct {
	kind, id string
	attempt  int
	node     string
}

type runKey struct {
	job     string
	attempt int
}

type endedKey struct {
	user, project, state string
	hour                 int64
}

// New returns an empty store.
func New() *Store {
	return &Store{
		jobs: map[string]*jobRow{}, events: map[string][]api.Event{}, holds: map[string]api.Hold{},
		idem: map[string]string{}, settings: map[string]string{}, nodes: map[string]string{},
		arrays: map[string]store.ArrayRecord{}, bookings: map[string]api.Reservation{},
		usage: map[usageKey]usage.Record{}, ended: map[endedKey]*store.UsageRow{},
		numbers: map[int64]string{}, numberOf: map[string]int64{}, history: map[int64][]byte{},
		runs: map[runKey]store.RunRow{},
	}
}

var _ store.Log = (*Store)(nil)

// FailCommits makes every Commit fail with err, writing nothing, until it
// is called with nil: the store is down.
func (s *Store) FailCommits(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Outbox returns the notifications committed so far, in order.
func (s *Store) Outbox() []store.OutboxItem {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.outbox)
}

// Audit returns the audit entries committed so far, in order.
func (s *Store) Audit() []api.AuditEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.audit)
}

// Commit writes b, all or nothing: every row is checked (and encoded)
// before anything changes.
func (s *Store) Commit(ctx context.Context, b *store.Batch) error {
	if b.Empty() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return fmt.Errorf("commit: %w", s.fail)
	}
	p, err := s.check(b)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, r := range p.jobs {
		s.jobs[r.job.ID] = r
	}
	for _, e := range p.events {
		s.events[e.JobID] = append(s.events[e.JobID], e.Event)
	}
	for _, h := range p.holds {
		s.holds[h.JobID] = h
	}
	for _, id := range b.DeleteHolds {
		delete(s.holds, id)
	}
	for k, id := range b.Idempotency {
		s.idem[k] = id
	}
	for id, data := range b.Nodes {
		s.nodes[id] = data
	}
	for k, v := range b.Settings {
		s.settings[k] = v
	}
	for _, it := range b.Outbox {
		if it.State == "" {
			it.State = store.OutboxPending
		}
		if it.NextAt.IsZero() {
			it.NextAt = it.CreatedAt
		}
		s.outbox = append(s.outbox, it)
	}
	for _, r := range p.arrays {
		s.arrays[r.Array.ID] = r
	}
	for _, r := range p.bookings {
		s.bookings[r.Name] = r
	}
	for _, name := range b.DeleteBookings {
		delete(s.bookings, name)
	}
	for _, r := range b.Usage {
		r.Start, r.End = r.Start.UTC(), r.End.UTC()
		s.usage[usageKey{r.Kind, r.ID, r.Attempt, r.Node}] = r
	}
	for _, r := range b.Runs {
		r.EndedAt = r.EndedAt.UTC()
		s.runs[runKey{r.JobID, r.Attempt}] = r
	}
	s.summarize(b.Ended, 1)
	for _, n := range b.Numbers {
		s.numbers[n.Number], s.numberOf[n.ID] = n.ID, n.Number
	}
	s.audit = append(s.audit, b.Audit...)
	return nil
}

// prepared is a batch's rows as the store keeps them, made before
// anything changes.
type prepared struct {
	jobs     []*jobRow
	events   []store.JobEvent
	holds    []api.Hold
	arrays   []store.ArrayRecord
	bookings []api.Reservation
}

// check refuses a batch the SQL stores would refuse whole (times out of
// range, a number or an idempotency key given twice, rows that do not
// encode or would not load), and returns its rows as the store keeps
// them.
func (s *Store) check(b *store.Batch) (*prepared, error) {
	p := &prepared{jobs: make([]*jobRow, 0, len(b.Jobs))}
	for _, j := range b.Jobs {
		if err := checkTimes("job "+j.ID, j.SubmittedAt, j.StartedAt, j.FinishedAt); err != nil {
			return nil, err
		}
		j.Events = nil
		c, err := roundTrip(j)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		r := &jobRow{job: c}
		if c.State.Terminal() {
			r.finished = 1 // ended at an unknown time: still not 0
			if c.FinishedAt != nil && !c.FinishedAt.IsZero() {
				r.finished = c.FinishedAt.UnixNano()
			}
		}
		p.jobs = append(p.jobs, r)
	}
	for _, e := range b.Events {
		ev, err := roundTrip(e.Event)
		if err != nil {
			return nil, fmt.Errorf("event of %s: %w", e.JobID, err)
		}
		p.events = append(p.events, store.JobEvent{JobID: e.JobID, Event: ev})
	}
	for _, h := range b.Holds {
		c, err := roundTrip(h)
		if err != nil {
			return nil, fmt.Errorf("hold %s: %w", h.JobID, err)
		}
		p.holds = append(p.holds, c)
	}
	for _, r := range b.Arrays {
		fin := r.Finished
		r.Array.Counts, r.Array.State = api.ArrayCounts{}, ""
		r.Template.Events = nil
		c, err := roundTrip(r)
		if err != nil {
			return nil, fmt.Errorf("array %s: %w", r.Array.ID, err)
		}
		c.Finished = fin
		p.arrays = append(p.arrays, c)
	}
	for _, r := range b.Bookings {
		c, err := roundTrip(r)
		if err != nil {
			return nil, fmt.Errorf("booking %s: %w", r.Name, err)
		}
		p.bookings = append(p.bookings, c)
	}
	for k := range b.Idempotency {
		if _, ok := s.idem[k]; ok {
			return nil, fmt.Errorf("%w: idempotency key %q is taken", store.ErrUnstorable, k)
		}
	}
	for _, r := range b.Usage {
		if err := checkTimes("usage of "+r.ID, r.Start, nil, nil); err != nil {
			return nil, err
		}
		if err := checkTimes("usage of "+r.ID, r.End, nil, nil); err != nil {
			return nil, err
		}
	}
	for _, r := range b.Runs {
		if err := checkTimes("run of "+r.JobID, r.EndedAt, nil, nil); err != nil {
			return nil, err
		}
		if r.Ran < 0 || r.TimeLimit < 0 {
			return nil, fmt.Errorf("%w: run of %s: a negative run time or time limit", store.ErrUnstorable, r.JobID)
		}
	}
	seen := map[int64]bool{}
	ids := map[string]bool{}
	for _, n := range b.Numbers {
		if n.Number <= 0 {
			return nil, fmt.Errorf("%w: number %d of %s: numbers start at 1", store.ErrUnstorable, n.Number, n.ID)
		}
		if _, ok := s.numbers[n.Number]; ok || seen[n.Number] {
			return nil, fmt.Errorf("%w: number %d of %s is taken", store.ErrUnstorable, n.Number, n.ID)
		}
		if _, ok := s.numberOf[n.ID]; ok || ids[n.ID] {
			return nil, fmt.Errorf("%w: %s has a number", store.ErrUnstorable, n.ID)
		}
		seen[n.Number], ids[n.ID] = true, true
	}
	return p, nil
}

// The years a row's nanoseconds can hold, as the SQL stores check them.
var (
	minNanos = time.Unix(0, -1<<63+1)
	maxNanos = time.Unix(0, 1<<63-1)
)

func checkTimes(what string, t time.Time, more ...*time.Time) error {
	ts := []time.Time{t}
	for _, m := range more {
		if m != nil {
			ts = append(ts, *m)
		}
	}
	for _, t := range ts {
		if !t.IsZero() && (t.Before(minNanos) || t.After(maxNanos)) {
			return fmt.Errorf("%w: %s: time %s is outside the years the store can write", store.ErrUnstorable, what, t.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// summarize adds (sign 1) or takes away (sign -1) ended jobs from the
// summary of ended jobs, dropping rows left with none.
func (s *Store) summarize(ended []store.EndedJob, sign int) {
	for _, e := range ended {
		h := e.FinishedAt.UnixNano() / int64(time.Hour)
		k := endedKey{e.User, e.Project, string(e.State), h}
		r := s.ended[k]
		if r == nil {
			r = &store.UsageRow{User: e.User, Project: e.Project, State: e.State, Hour: time.Unix(0, h*int64(time.Hour)).UTC()}
			s.ended[k] = r
		}
		r.Jobs += sign
		r.GPUSeconds += float64(sign) * e.GPUSeconds
		r.RunSeconds += float64(sign) * e.RunSeconds
		if r.Jobs <= 0 {
			delete(s.ended, k)
		}
	}
}

// roundTrip is v as a row gives it back: encoded and decoded as JSON, so
// that what the store keeps shares nothing with the caller's value. A
// value that does not encode is refused as the SQL stores refuse it
// (store.Permanent); one that does not decode would fail their Load, so
// it is refused too, as unstorable.
func roundTrip[T any](v T) (T, error) {
	var out T
	data, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("%w: it would not load: %v", store.ErrUnstorable, err)
	}
	return out, nil
}

// clone is a copy of a value the store already holds (it round-tripped
// once, so it does again).
func clone[T any](v T) T {
	out, err := roundTrip(v)
	if err != nil {
		panic(fmt.Sprintf("memstore: a stored %T does not round-trip: %v", v, err))
	}
	return out
}

// live reports whether a job is read back at start-up: not ended, or an
// ended task of an array that is not done.
func (s *Store) live(r *jobRow) bool {
	if !r.job.State.Terminal() {
		return true
	}
	if r.job.ArrayJobID == "" {
		return false
	}
	a, ok := s.arrays[r.job.ArrayJobID]
	return ok && a.Finished.IsZero()
}

// Load reads what start-up needs: everything but finished jobs.
func (s *Store) Load(ctx context.Context) (*store.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := &store.State{Idempotency: map[string]string{}, Settings: map[string]string{}, Nodes: map[string]string{}}
	for _, r := range s.jobs {
		if !s.live(r) {
			continue
		}
		j := clone(r.job)
		j.Events = slices.Clone(s.events[j.ID])
		st.Jobs = append(st.Jobs, j)
	}
	slices.SortFunc(st.Jobs, func(a, b api.Job) int { return strings.Compare(a.ID, b.ID) })
	for k, id := range s.idem {
		if r, ok := s.jobs[id]; ok && !r.job.State.Terminal() {
			st.Idempotency[k] = id
		}
	}
	for _, id := range sortedKeys(s.holds) {
		st.Holds = append(st.Holds, s.holds[id])
	}
	for k, v := range s.settings {
		st.Settings[k] = v
	}
	for k, v := range s.nodes {
		st.Nodes[k] = v
	}
	for _, id := range sortedKeys(s.arrays) {
		if a := s.arrays[id]; a.Finished.IsZero() {
			a.Finished = time.Time{}
			st.Arrays = append(st.Arrays, clone(a))
		}
	}
	for _, name := range sortedKeys(s.bookings) {
		st.Bookings = append(st.Bookings, clone(s.bookings[name]))
	}
	for n := range s.numbers {
		st.MaxNumber = max(st.MaxNumber, n)
	}
	st.Runs = s.recentRuns(store.DefaultLoadRuns)
	return st, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
