package slurm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// fakeRunner answers Slurm commands from a table of recorded outputs,
// keyed by the command line's first words, and records every call.
type fakeRunner struct {
	mu      sync.Mutex
	answers map[string]fakeAnswer // "squeue", "scontrol show -o job", ...
	calls   []string
}

type fakeAnswer struct {
	out string
	err error
}

func newFake() *fakeRunner { return &fakeRunner{answers: map[string]fakeAnswer{}} }

func (f *fakeRunner) set(prefix, out string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[prefix] = fakeAnswer{out, err}
}

func (f *fakeRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, line)
	best := ""
	for p := range f.answers {
		if strings.HasPrefix(line, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil, errors.New(name + ": no recorded answer")
	}
	a := f.answers[best]
	return []byte(a.out), a.err
}

func (f *fakeRunner) called(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// updates records what the executor sends to its sink.
type updates struct {
	mu sync.Mutex
	us []exec.Update
}

func (u *updates) sink(x exec.Update) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.us = append(u.us, x)
}

func (u *updates) all() []exec.Update {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exec.Update(nil), u.us...)
}

// fakeBook records node news.
type fakeBook struct {
	mu         sync.Mutex
	registered map[string]api.AgentRegistration
	seen, down map[string]int
	actions    []string
}

func newBook() *fakeBook {
	return &fakeBook{registered: map[string]api.AgentRegistration{}, seen: map[string]int{}, down: map[string]int{}}
}

func (b *fakeBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.registered[reg.NodeID] = reg
	return nil
}

func (b *fakeBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[id]++
}

func (b *fakeBook) NodeDown(id string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down[id]++
}

func (b *fakeBook) SetNodeState(ctx context.Context, id, action string) (api.NodeAction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.actions = append(b.actions, id+" "+action)
	return api.NodeAction{NodeID: id, State: action}, nil
}
