package router

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

// fake records what it was asked.
type fake struct {
	name    string
	mu      sync.Mutex
	calls   []string
	notices int
}

func (f *fake) log(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fake) Start(_ context.Context, t exec.Task) error {
	f.log("start " + t.JobID)
	return nil
}
func (f *fake) Adopt(_ context.Context, t exec.Task) error { f.log("adopt " + t.JobID); return nil }
func (f *fake) Stop(_ context.Context, job string, _ int, _ time.Duration) error {
	f.log("stop " + job)
	return nil
}

type noticing struct{ *fake }

func (n noticing) Notice(context.Context, string, int, string) error { n.log("notice"); return nil }

func (f *fake) got() string { f.mu.Lock(); defer f.mu.Unlock(); return strings.Join(f.calls, ",") }

func task(job string, nodes ...string) exec.Task {
	t := exec.Task{JobID: job, NodeID: nodes[0]}
	for _, n := range nodes {
		t.Ranks = append(t.Ranks, exec.Rank{NodeID: n})
	}
	return t
}

func TestRouter(t *testing.T) {
	agents, ray := &fake{name: "agents"}, &fake{name: "ray"}
	r, err := New(Route{Name: "agents", Pool: "agents", Exec: noticing{agents}},
		Route{Name: "ray", Pool: "ray", Exec: ray, Owns: func(n string) bool { return strings.HasPrefix(n, "ray-") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tk := range []exec.Task{task("a", "gpu1"), task("b", "ray-10.0.0.1"), task("g", "gpu1", "gpu2")} {
		if err := r.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Start(ctx, task("mixed", "gpu1", "ray-10.0.0.1")); err == nil {
		t.Fatal("a gang across pools was accepted")
	}
	if err := r.Adopt(ctx, task("c", "ray-10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	r.Stop(ctx, "b", 0, time.Second)
	r.Notice(ctx, "a", 0, "x")
	r.Notice(ctx, "b", 0, "x") // ray cannot warn: nothing
	r.Stop(ctx, "unknown", 0, 0)
	// An attempt that ended is forgotten: its stop goes everywhere.
	r.Sink(func(exec.Update) {})(exec.Update{JobID: "a", Kind: exec.Exited})
	r.Stop(ctx, "a", 0, 0)
	if got, want := agents.got(), "start a,start g,notice,stop unknown,stop a"; got != want {
		t.Errorf("agents got %q, want %q", got, want)
	}
	if got, want := ray.got(), "start b,adopt c,stop b,stop unknown,stop a"; got != want {
		t.Errorf("ray got %q, want %q", got, want)
	}
	if h := r.Health(); len(h) != 2 || h[0].Name != "ray" || h[1].Name != "agents" {
		t.Errorf("health %+v", h)
	}
	if _, err := New(Route{Name: "x", Exec: ray}, Route{Name: "y", Exec: agents}); err == nil {
		t.Error("two default routes were accepted")
	}
}
