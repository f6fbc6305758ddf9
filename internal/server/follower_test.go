package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// fakeLeaderStore is a FollowerStore whose lease row the test sets.
type fakeLeaderStore struct {
	leader store.LeaderInfo
	reads  int
}

func (f *fakeLeaderStore) Leader(context.Context, time.Time) (store.LeaderInfo, error) {
	f.reads++
	return f.leader, nil
}
func (f *fakeLeaderStore) JobsPage(context.Context, store.JobQuery) ([]api.Job, bool, error) {
	return nil, false, nil
}
func (f *fakeLeaderStore) Job(context.Context, string) (api.Job, error) {
	return api.Job{}, store.ErrNoJob
}
func (f *fakeLeaderStore) JobIDsWithPrefix(context.Context, string, int) ([]string, error) {
	return nil, nil
}
func (f *fakeLeaderStore) NumberID(context.Context, int64) (string, bool, error) {
	return "", false, nil
}

func TestFollowerRedirectsToTheLeader(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	st := &fakeLeaderStore{}
	f := NewFollower(FollowerConfig{Store: st, Self: "http://b:7450", Now: func() time.Time { return now }})
	do := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		f.ServeHTTP(w, httptest.NewRequest(method, target, strings.NewReader(`{"command":"true"}`)))
		return w
	}

	// No leader: 503 with Retry-After, for changes and health alike.
	if w := do("POST", "/queue/submit"); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("no leader: %d Retry-After %q; want 503 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	var h Health
	if w := do("GET", "/healthz"); w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &h) != nil || h.Role != "follower" || h.Leader != "" || h.Self != "http://b:7450" {
		t.Fatalf("healthz with no leader: %d %s", w.Code, w.Body)
	}

	// A leader: every other request goes there, path and query kept. The
	// lease row is read again once leaderCache has passed.
	st.leader = store.LeaderInfo{Holder: "a", Address: "http://a:7450", Epoch: 3, Expires: now.Add(time.Minute)}
	now = now.Add(leaderCache)
	for _, tc := range []struct{ method, target, want string }{
		{"POST", "/queue/submit", "http://a:7450/queue/submit"},
		{"DELETE", "/queue/j1", "http://a:7450/queue/j1"},
		{"GET", "/queue?limit=10&cursor=x", "http://a:7450/queue?limit=10&cursor=x"},
		{"GET", "/jobs/j1/logs?follow=true", "http://a:7450/jobs/j1/logs?follow=true"},
		{"GET", "/jobs", "http://a:7450/jobs"}, // no Auth: reads go to the leader too
	} {
		w := do(tc.method, tc.target)
		var body api.ErrorBody
		json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != http.StatusTemporaryRedirect || w.Header().Get("Location") != tc.want || body.Error.Code != "not_leader" || !strings.Contains(body.Error.Message, "http://a:7450") {
			t.Errorf("%s %s: %d Location %q body %s; want 307 to %s", tc.method, tc.target, w.Code, w.Header().Get("Location"), w.Body, tc.want)
		}
	}
	if w := do("GET", "/healthz"); json.Unmarshal(w.Body.Bytes(), &h) != nil || h.Leader != "http://a:7450" {
		t.Fatalf("healthz with a leader: %s", w.Body)
	}

	// The lease row is cached: many requests within leaderCache, one read.
	reads := st.reads
	for range 10 {
		do("POST", "/queue/submit")
	}
	if st.reads != reads {
		t.Errorf("%d reads of the lease row within %s; want none", st.reads-reads, leaderCache)
	}
	// A lease this server itself is said to hold (it is about to lead)
	// is no place to send anyone.
	st.leader.Address = "http://b:7450"
	now = now.Add(leaderCache)
	if w := do("POST", "/queue/submit"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("leader is self: %d; want 503", w.Code)
	}
}
