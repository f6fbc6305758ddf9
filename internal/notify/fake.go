package notify

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// MemStore is an in-memory EndpointStore and OutboxStore, for tests: the
// fake beside store.Store.
type MemStore struct {
	mu       sync.Mutex
	eps      []store.EndpointRecord
	defaults []store.NotifyDefaultRecord
	outbox   []store.OutboxItem
	seq      int64
}

// PutEndpoint implements EndpointStore.
func (m *MemStore) PutEndpoint(_ context.Context, e store.EndpointRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.eps {
		if m.eps[i].ID == e.ID {
			m.eps[i] = e
			return nil
		}
	}
	m.eps = append(m.eps, e)
	return nil
}

// DeleteEndpoint implements EndpointStore.
func (m *MemStore) DeleteEndpoint(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eps = slices.DeleteFunc(m.eps, func(e store.EndpointRecord) bool { return e.ID == id })
	for i := range m.outbox {
		if m.outbox[i].EndpointID == id && m.outbox[i].State == store.OutboxPending {
			m.outbox[i].State, m.outbox[i].LastError = store.OutboxFailed, "the endpoint was removed"
		}
	}
	return nil
}

// Endpoints implements EndpointStore.
func (m *MemStore) Endpoints(context.Context) ([]store.EndpointRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.eps), nil
}

// AppendOutbox implements OutboxStore.
func (m *MemStore) AppendOutbox(_ context.Context, items ...store.OutboxItem) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		m.seq++
		it.Seq = m.seq
		if it.State == "" {
			it.State = store.OutboxPending
		}
		if it.NextAt.IsZero() {
			it.NextAt = it.CreatedAt
		}
		m.outbox = append(m.outbox, it)
	}
	return nil
}

// PendingOutbox implements OutboxStore.
func (m *MemStore) PendingOutbox(_ context.Context, limit int) ([]store.OutboxItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.OutboxItem
	for _, it := range m.outbox {
		if it.State == store.OutboxPending {
			out = append(out, it)
		}
	}
	slices.SortStableFunc(out, func(a, b store.OutboxItem) int { return a.NextAt.Compare(b.NextAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DueOutbox implements OutboxStore.
func (m *MemStore) DueOutbox(_ context.Context, now time.Time, skip []string, limit int) ([]store.OutboxItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.OutboxItem
	for _, it := range m.outbox {
		if it.State == store.OutboxPending && !it.NextAt.After(now) && !slices.Contains(skip, it.EndpointID) {
			out = append(out, it)
		}
	}
	slices.SortStableFunc(out, func(a, b store.OutboxItem) int { return a.NextAt.Compare(b.NextAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// NextOutbox implements OutboxStore.
func (m *MemStore) NextOutbox(_ context.Context, now time.Time) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	for _, it := range m.outbox {
		if it.State == store.OutboxPending && it.NextAt.After(now) && (next.IsZero() || it.NextAt.Before(next)) {
			next = it.NextAt
		}
	}
	return next, !next.IsZero(), nil
}

// UpdateOutbox implements OutboxStore.
func (m *MemStore) UpdateOutbox(_ context.Context, us ...store.OutboxUpdate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range us {
		for i := range m.outbox {
			if m.outbox[i].Seq == u.Seq {
				it := &m.outbox[i]
				it.State, it.NextAt, it.Attempts, it.Digest, it.LastError, it.DeliveredAt = u.State, u.NextAt, u.Attempts, u.Digest, u.LastError, u.DeliveredAt
			}
		}
	}
	return nil
}

// Outbox returns the rows f selects, newest first (as store.Store.Outbox).
func (m *MemStore) Outbox(_ context.Context, f store.OutboxFilter) ([]store.OutboxItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []store.OutboxItem{}
	for i := len(m.outbox) - 1; i >= 0; i-- {
		it := m.outbox[i]
		if (f.Endpoints == nil || slices.Contains(f.Endpoints, it.EndpointID)) && (f.State == "" || it.State == f.State) &&
			(f.Before == 0 || it.Seq < f.Before) {
			out = append(out, it)
		}
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

// Recorder is a Deliverer that keeps what it is given, for tests; Fail,
// when set, decides each delivery's error.
type Recorder struct {
	mu   sync.Mutex
	Sent []Delivery
	Fail func(t Target, m Message) error
}

// Delivery is one message a Recorder was given.
type Delivery struct {
	Target  Target
	Message Message
}

// Deliver implements Deliverer.
func (r *Recorder) Deliver(_ context.Context, t Target, m Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail != nil {
		if err := r.Fail(t, m); err != nil {
			return err
		}
	}
	r.Sent = append(r.Sent, Delivery{t, m})
	return nil
}

// Deliveries returns a copy of what was delivered.
func (r *Recorder) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.Sent)
}

// PutNotifyDefault implements DefaultsStore.
func (m *MemStore) PutNotifyDefault(_ context.Context, d store.NotifyDefaultRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.defaults = slices.DeleteFunc(m.defaults, func(o store.NotifyDefaultRecord) bool { return o.User == d.User })
	m.defaults = append(m.defaults, d)
	return nil
}

// DeleteNotifyDefault implements DefaultsStore.
func (m *MemStore) DeleteNotifyDefault(_ context.Context, user string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.defaults = slices.DeleteFunc(m.defaults, func(o store.NotifyDefaultRecord) bool { return o.User == user })
	return nil
}

// NotifyDefaults implements DefaultsStore.
func (m *MemStore) NotifyDefaults(context.Context) ([]store.NotifyDefaultRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.defaults), nil
}
