package auth

import (
	"context"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// memStore is an in-memory Store.
type memStore struct{ tokens map[string]store.TokenRecord }

func (m *memStore) PutToken(_ context.Context, t store.TokenRecord) error {
	m.tokens[t.ID] = t
	return nil
}

func (m *memStore) Tokens(context.Context) ([]store.TokenRecord, error) {
	var out []store.TokenRecord
	for _, t := range m.tokens {
		out = append(out, t)
	}
	return out, nil
}

func (m *memStore) AppendAudit(context.Context, ...api.AuditEntry) error { return nil }

func (m *memStore) Audit(context.Context, store.AuditFilter) ([]api.AuditEntry, error) {
	return nil, nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestEnded: the channel of a live token closes when it is revoked (or,
// for the bootstrap token, replaced), and not before; an unknown or
// revoked token's is closed at once; other tokens' stay open.
func TestEnded(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, &memStore{tokens: map[string]store.TokenRecord{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := Principal{User: "root", Role: api.RoleAdmin}
	a, err := s.Create(ctx, api.TokenRequest{User: "ana"}, admin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Create(ctx, api.TokenRequest{User: "bo"}, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bootstrap(ctx, "first-secret-0123456789", "root"); err != nil {
		t.Fatal(err)
	}
	endA, endA2, endB, endBoot := s.Ended(a.ID), s.Ended(a.ID), s.Ended(b.ID), s.Ended(BootstrapID)
	if closed(endA) || closed(endB) || closed(endBoot) {
		t.Fatal("a live token's channel is closed")
	}
	if !closed(s.Ended("tok-unknown")) {
		t.Fatal("an unknown token's channel is open")
	}
	if _, err := s.Revoke(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if !closed(endA) || !closed(endA2) || closed(endB) {
		t.Fatalf("after revoking a: a closed %v %v, b closed %v", closed(endA), closed(endA2), closed(endB))
	}
	if !closed(s.Ended(a.ID)) {
		t.Fatal("a revoked token's channel is open")
	}
	if _, err := s.Revoke(ctx, a.ID); err != nil { // a no-op, twice: no double close
		t.Fatal(err)
	}
	if err := s.Bootstrap(ctx, "second-secret-0123456789", "root"); err != nil {
		t.Fatal(err)
	}
	if !closed(endBoot) {
		t.Fatal("the replaced bootstrap secret's streams were not told")
	}
}
