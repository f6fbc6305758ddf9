package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// scriptLink is a Link whose registrations and syncs answer from scripts,
// in order; a sync past its script waits for the end of the test.
type scriptLink struct {
	mu       sync.Mutex
	regs     []error // the answers to Register, in order; past the end: success
	syncs    []error // the answers to Sync, in order; nil: success
	calls    []string
	agentIDs []string
	sessions int
	synced   chan string // the session of each successful sync
}

func (l *scriptLink) Register(_ context.Context, r api.AgentRegistration) (api.AgentConfig, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "register")
	l.agentIDs = append(l.agentIDs, r.AgentID)
	if len(l.regs) > 0 {
		err := l.regs[0]
		l.regs = l.regs[1:]
		if err != nil {
			return api.AgentConfig{}, err
		}
	}
	l.sessions++
	return api.AgentConfig{NodeID: r.NodeID, NodeTTL: 30, Session: fmt.Sprintf("s%d", l.sessions)}, nil
}

func (l *scriptLink) Sync(ctx context.Context, _ api.AgentReport) (api.AgentWork, error) {
	l.mu.Lock()
	l.calls = append(l.calls, "sync")
	if len(l.syncs) == 0 {
		l.mu.Unlock()
		<-ctx.Done()
		return api.AgentWork{}, ctx.Err()
	}
	err := l.syncs[0]
	l.syncs = l.syncs[1:]
	session := fmt.Sprintf("s%d", l.sessions)
	l.mu.Unlock()
	if err != nil {
		return api.AgentWork{}, fmt.Errorf("/agent/v1/sync: %w", err)
	}
	l.synced <- session
	return api.AgentWork{}, nil
}

func (l *scriptLink) ShipLog(context.Context, api.LogChunk) error { return nil }

var (
	errWrongNode = &api.Error{Status: http.StatusForbidden, Code: "wrong_node", Message: "this agent session did not register node n1"}
	errNodeInUse = &api.Error{Status: http.StatusConflict, Code: "node_in_use", Field: "node_id", Message: "node n1 is held by another agent"}
)

// An agent whose session another registration of its node replaced (403
// wrong_node: a replayed registration, or a take-over) registers again
// with its own agent id and a new session, and goes on syncing with it;
// refused because another agent holds the node (409 node_in_use), it says
// so plainly, once, and registers again later rather than retrying its
// dead session.
func TestAgentRegistersAgainWhenSuperseded(t *testing.T) {
	cases := map[string]struct {
		regs     []error
		wantLog  string
		wantRegs int
	}{
		"a replayed registration": {
			wantLog:  "registering again with a new session",
			wantRegs: 2,
		},
		"a take-over by another agent": {
			regs:     []error{nil, errNodeInUse},
			wantLog:  "another agent holds this node",
			wantRegs: 3,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			link := &scriptLink{regs: tc.regs, syncs: []error{nil, errWrongNode, nil}, synced: make(chan string, 4)}
			var logs lockedLog
			a, err := New(Config{NodeID: "n1", Link: link, StateDir: t.TempDir(), LogDir: t.TempDir(), Shim: []string{"true"},
				Containment: contain.ProcessGroup, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()

			for i, want := range []string{"s1", fmt.Sprintf("s%d", 2)} {
				select {
				case got := <-link.synced:
					if got != want {
						t.Fatalf("sync %d with session %s; want %s", i, got, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no sync %d; calls %v; log:\n%s", i, link.calls, logs.String())
				}
			}
			link.mu.Lock()
			defer link.mu.Unlock()
			if len(link.agentIDs) != tc.wantRegs {
				t.Fatalf("registrations %d (%v); want %d", len(link.agentIDs), link.calls, tc.wantRegs)
			}
			for _, id := range link.agentIDs {
				if id != link.agentIDs[0] || id == "" {
					t.Fatalf("agent ids %v; want one, the agent's own", link.agentIDs)
				}
			}
			if got := logs.String(); strings.Count(got, tc.wantLog) != 1 {
				t.Fatalf("log says %q %d times; want once:\n%s", tc.wantLog, strings.Count(got, tc.wantLog), got)
			}
		})
	}
}

// Replaced soon after each registration (two agents with one id), an
// agent waits longer each time before registering again; replaced once
// after a long while, it registers again at once.
func TestSupersedeWaits(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		after []time.Duration // each replacement, this long after the registration before
		want  []time.Duration
	}{
		"once":               {after: []time.Duration{time.Hour}, want: []time.Duration{0}},
		"now and then":       {after: []time.Duration{time.Hour, 2 * time.Minute, time.Hour}, want: []time.Duration{0, 0, 0}},
		"again and again":    {after: []time.Duration{time.Second, time.Second, time.Second, time.Second}, want: []time.Duration{0, supersedeFirst, 2 * supersedeFirst, 4 * supersedeFirst}},
		"capped":             {after: repeat(time.Second, 12), want: append([]time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 320 * time.Second}, repeat(supersedeMax, 5)...)},
		"calm after a storm": {after: []time.Duration{time.Second, time.Second, 2 * time.Minute}, want: []time.Duration{0, supersedeFirst, 0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s supersede
			at := t0
			for i, d := range tc.after {
				s.registered(at)
				at = at.Add(d)
				if got := s.next(at); got != tc.want[i] {
					t.Fatalf("replacement %d: wait %s; want %s", i, got, tc.want[i])
				}
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// lockedLog collects log output from several goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
