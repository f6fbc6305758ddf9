package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestExecutorFlagParse(t *testing.T) {
	for _, c := range []struct {
		in, want string
		up       bool
		bad      string
	}{
		{in: "agents", want: "agents"},
		{in: "ray", want: "ray"},
		{in: "ray, agents", want: "agents,ray"},
		{in: "agents,agents", bad: "named twice"},
		{in: "k8s", want: "k8s"},
		{in: "k8s,agents", want: "agents,k8s"},
		{in: "k8s", up: true, bad: "own agent"},
		{in: "ray,k8s", bad: "one engine at a time"},
		{in: "agents,slurm,k8s", bad: "one engine at a time"},
		{in: "kube", bad: "not an executor"},
		{in: "ray", up: true, bad: "own agent"},
		{in: "agents,ray", up: true, want: "agents,ray"},
	} {
		e, err := newEngines(&executorFlags{kinds: c.in}, c.up)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: %v, want an error saying %q", c.in, err, c.bad)
			}
			continue
		}
		if err != nil || strings.Join(e.pools(), ",") != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, e, err, c.want)
		}
	}
}

type regBook struct{ got []api.AgentRegistration }

func (b *regBook) RegisterNode(_ context.Context, r api.AgentRegistration, _ string) error {
	b.got = append(b.got, r)
	return nil
}
func (b *regBook) NodeSeen(string, []api.GPUReading, []api.ForeignProcess, time.Time) {}

func TestAgentBookPools(t *testing.T) {
	ctx := context.Background()
	mixed, _ := newEngines(&executorFlags{kinds: "agents,ray"}, false)
	inner := &regBook{}
	b := mixed.agentBook(inner)
	if err := b.RegisterNode(ctx, api.AgentRegistration{NodeID: "box", Labels: map[string]string{"pool": "ray", "rack": "r1"}}, ""); err != nil {
		t.Fatal(err)
	}
	if l := inner.got[0].Labels; l["pool"] != "agents" || l["rack"] != "r1" {
		t.Fatalf("labels %v: an agent's node is pool agents", l)
	}
	var ae *api.Error
	if err := b.RegisterNode(ctx, api.AgentRegistration{NodeID: "ray-10.0.0.1"}, ""); !errors.As(err, &ae) || ae.Field != "node_id" {
		t.Fatalf("an agent taking a Ray node's name: %v", err)
	}
	withK8s, _ := newEngines(&executorFlags{kinds: "agents,k8s"}, false)
	if err := withK8s.agentBook(inner).RegisterNode(ctx, api.AgentRegistration{NodeID: "k8s-gpu-a"}, ""); !errors.As(err, &ae) || ae.Field != "node_id" {
		t.Fatalf("an agent taking a Kubernetes node's name: %v", err)
	}
	rayOnly, _ := newEngines(&executorFlags{kinds: "ray"}, false)
	if err := rayOnly.agentBook(inner).RegisterNode(ctx, api.AgentRegistration{NodeID: "box"}, ""); !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "no_agents" {
		t.Fatalf("an agent on a Ray-only server: %v", err)
	}
	if len(inner.got) != 1 {
		t.Fatalf("refused registrations reached the orchestrator: %d", len(inner.got))
	}
}
