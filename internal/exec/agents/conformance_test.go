package agents_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/agents"
	"github.com/corral-sched/corral/internal/exec/exectest"
)

// TestMain lets this test binary be the agents' shim (`corral shim`).
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_EXECTEST_SHIM") == "1" {
		os.Exit(agent.RunShim(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// book accepts every node.
type book struct{}

func (book) RegisterNode(context.Context, api.AgentRegistration, string) error  { return nil }
func (book) NodeSeen(string, []api.GPUReading, []api.ForeignProcess, time.Time) {}

// link is an in-process agent's link to whichever pool is current: a
// restart swaps the pool, as a server restart does.
type link struct {
	mu   sync.Mutex
	pool *agents.Pool
}

func (l *link) current() *agents.Pool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pool
}

func (l *link) Register(ctx context.Context, r api.AgentRegistration) (api.AgentConfig, error) {
	return l.current().Register(ctx, r, "127.0.0.1")
}

func (l *link) Sync(ctx context.Context, r api.AgentReport) (api.AgentWork, error) {
	w, err := l.current().Sync(ctx, r)
	if errors.Is(err, agents.ErrUnknownNode) {
		return w, fmt.Errorf("%w", agent.ErrUnknownNode)
	}
	return w, err
}

func (l *link) ShipLog(context.Context, api.LogChunk) error { return nil }

// TestConformance runs the executor suite against the agents' pool with
// two real agents (simulated GPUs, process-group containment).
func TestConformance(t *testing.T) {
	exectest.Run(t, func(t *testing.T) *exectest.Harness {
		t.Setenv("CORRAL_EXECTEST_SHIM", "1")
		dir := t.TempDir()
		u := exectest.NewUpdates()
		quiet := slog.New(slog.DiscardHandler)
		newPool := func() *agents.Pool {
			return agents.New(agents.Config{Sink: u.Sink, Book: book{}, Interval: 200 * time.Millisecond, NodeTTL: 5 * time.Second, Logger: quiet})
		}
		l := &link{pool: newPool()}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		for _, n := range []string{"n1", "n2"} {
			a, err := agent.New(agent.Config{NodeID: n, Hostname: n, Address: "127.0.0.1", GPUs: gpu.NewSimulated(n, gpu.SimSpec{Count: 2}),
				StateDir: filepath.Join(dir, "agent-"+n), LogDir: filepath.Join(dir, "logs"), Link: l, Detach: true,
				Interval: 200 * time.Millisecond, RunAs: agent.RunAsAgent, Containment: "process-group",
				Shim: []string{os.Args[0]}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); a.Run(ctx) }()
			select {
			case <-a.Registered():
			case <-time.After(30 * time.Second):
				t.Fatalf("agent %s did not register", n)
			}
		}
		return &exectest.Harness{
			Exec: l.current(), Updates: u, Dir: dir,
			Place: func(nodes, gpus int) ([]exec.Rank, bool) {
				if nodes > 2 {
					return nil, false
				}
				var rs []exec.Rank
				for i := range nodes {
					r := exec.Rank{NodeID: []string{"n1", "n2"}[i]}
					for g := range gpus {
						r.GPUs = append(r.GPUs, g)
					}
					rs = append(rs, r)
				}
				return rs, true
			},
			Restart: func(t *testing.T) exec.Executor {
				p := newPool()
				l.mu.Lock()
				l.pool = p
				l.mu.Unlock()
				return p
			},
		}
	})
}
