package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/agents"
	"github.com/corral-sched/corral/internal/exec/k8s"
	"github.com/corral-sched/corral/internal/exec/ray"
	"github.com/corral-sched/corral/internal/exec/router"
	"github.com/corral-sched/corral/internal/exec/slurm"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// executorFlags choose what runs the jobs: --executor agents (the
// default), slurm, ray, k8s, or agents with one engine (agents,slurm,
// agents,ray or agents,k8s: a mixed cluster, docs/pools.md).
type executorFlags struct {
	kinds string
	k8s   k8sFlags   // k8sflags.go
	ray   rayFlags   // rayflags.go
	slurm slurmFlags // slurmflags.go
}

func (f *executorFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kinds, "executor", api.PoolAgents, "what runs the jobs: agents (corral agent on each node), slurm (sbatch on a Slurm cluster; see --slurm-*), ray (a Ray cluster's Jobs API; see --ray-*), k8s (pods on a Kubernetes cluster; see --k8s-*), or agents with one engine (agents,slurm, agents,ray or agents,k8s: jobs pick one with --pool)")
	f.k8s.register(fl)
	f.ray.register(fl)
	f.slurm.register(fl)
}

// check validates the flags before anything starts.
func (f *executorFlags) check() error {
	kinds, err := f.parse()
	if err != nil {
		return err
	}
	if slices.Contains(kinds, api.PoolSlurm) {
		return f.slurm.check()
	}
	return nil
}

// parse returns the chosen executors, in a fixed order.
func (f *executorFlags) parse() ([]string, error) {
	var out []string
	for _, k := range strings.Split(f.kinds, ",") {
		k = strings.TrimSpace(k)
		switch k {
		case api.PoolAgents, api.PoolRay, api.PoolSlurm, api.PoolK8s:
		default:
			return nil, cmdkit.Usagef("--executor %q: %q is not an executor (want agents, slurm, ray, k8s, agents,slurm, agents,ray or agents,k8s)", f.kinds, k)
		}
		if slices.Contains(out, k) {
			return nil, cmdkit.Usagef("--executor %q: %s is named twice", f.kinds, k)
		}
		out = append(out, k)
	}
	engines := 0
	for _, k := range out {
		if k != api.PoolAgents {
			engines++
		}
	}
	if engines > 1 {
		return nil, cmdkit.Usagef("--executor %q: one engine at a time (slurm, ray or k8s), with or without agents", f.kinds)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(order(a), order(b)) })
	return out, nil
}

func order(k string) string {
	if k == api.PoolAgents {
		return "0"
	}
	return "1" + k
}

// engines is what runs the jobs of a server: its agents' pool, and the
// engine of a mixed cluster. Built in two steps: the agents' pool takes
// sink and agentBook before the engine exists.
type engines struct {
	kinds  []string
	rt     *router.Router // nil: one executor
	ray    *ray.Executor
	slurm  *slurm.Executor
	k8s    *k8s.Executor
	single exec.Executor
}

// newEngines checks the flags; up (corral up, whose own agent runs jobs)
// must keep the agents.
func newEngines(f *executorFlags, up bool) (*engines, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	kinds, err := f.parse()
	if err != nil {
		return nil, err
	}
	if up && !slices.Contains(kinds, api.PoolAgents) {
		return nil, cmdkit.Usagef("--executor %s: corral up runs jobs on its own agent; use agents,%s (or corral server --executor %s)", f.kinds, f.kinds, f.kinds)
	}
	return &engines{kinds: kinds}, nil
}

func (e *engines) has(k string) bool { return slices.Contains(e.kinds, k) }

// sink wraps the orchestrator's sink: the router forgets attempts that
// ended. Set up before any executor runs.
func (e *engines) sink(next exec.Sink) exec.Sink {
	return func(u exec.Update) {
		if e.rt != nil {
			e.rt.Sink(next)(u)
			return
		}
		next(u)
	}
}

// agentBook is the agents' pool's node book: its nodes are pool agents;
// a server without agents refuses them, and a node id of an engine's
// (ray-…) is not an agent's to take.
func (e *engines) agentBook(next agents.NodeBook) agents.NodeBook {
	return agentBook{next: next, e: e}
}

type agentBook struct {
	next agents.NodeBook
	e    *engines
}

func (b agentBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	if !b.e.has(api.PoolAgents) {
		return &api.Error{Status: http.StatusForbidden, Code: "no_agents", Field: "node_id",
			Message: fmt.Sprintf("this server runs its jobs on %s only (--executor %s); it takes no agents", strings.Join(b.e.kinds, ","), strings.Join(b.e.kinds, ","))}
	}
	if b.e.has(api.PoolRay) && strings.HasPrefix(reg.NodeID, "ray-") {
		return api.Invalid("node_id", "node names starting with ray- are the Ray cluster's on this server; give the agent another --node-name")
	}
	if b.e.has(api.PoolK8s) && k8s.Owns(reg.NodeID) {
		return api.Invalid("node_id", "node names starting with "+k8s.NodePrefix+" are the Kubernetes cluster's on this server; give the agent another --node-name")
	}
	labels := map[string]string{}
	for k, v := range reg.Labels {
		labels[k] = v
	}
	labels["pool"] = api.PoolAgents
	reg.Labels = labels
	return b.next.RegisterNode(ctx, reg, addr)
}

func (b agentBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	b.next.NodeSeen(id, r, f, at)
}

// NodeDisk passes the disk news on when the book takes them.
func (b agentBook) NodeDisk(id, full string) {
	if d, ok := b.next.(agents.DiskBook); ok {
		d.NodeDisk(id, full)
	}
}

// build makes the executor the orchestrator drives: the agents' pool
// alone, an engine alone, or a router over both.
func (e *engines) build(f *executorFlags, pool *agents.Pool, o **orchestrator.Orchestrator, sink exec.Sink, dataDir string, cancelGrace time.Duration, maxLog int64, logger *slog.Logger) error {
	routes := []router.Route{}
	if e.has(api.PoolAgents) {
		routes = append(routes, router.Route{Name: "agents", Pool: api.PoolAgents, Exec: pool})
	}
	if e.has(api.PoolRay) {
		r, err := f.ray.executor(rayBook{o}, sink, cancelGrace, maxLog, logger)
		if err != nil {
			return err
		}
		e.ray = r
		rt := router.Route{Name: "ray", Pool: api.PoolRay, Exec: r}
		if len(routes) > 0 {
			rt.Owns = func(node string) bool { return strings.HasPrefix(node, "ray-") }
		}
		routes = append(routes, rt)
	}
	if e.has(api.PoolK8s) {
		k, err := f.k8s.executor(k8sBook{o}, sink, cancelGrace, maxLog, logger)
		if err != nil {
			return err
		}
		e.k8s = k
		rt := router.Route{Name: "k8s", Pool: api.PoolK8s, Exec: k}
		if len(routes) > 0 {
			rt.Owns = k8s.Owns
		}
		routes = append(routes, rt)
	}
	if e.has(api.PoolSlurm) {
		s, err := f.slurm.newSlurm(sink, o, dataDir, cancelGrace, logger)
		if err != nil {
			return err
		}
		e.slurm = s
		rt := router.Route{Name: "slurm", Pool: api.PoolSlurm, Exec: s}
		if len(routes) > 0 {
			rt.Owns = s.Owns
		}
		routes = append(routes, rt)
	}
	if len(routes) == 1 {
		e.single = routes[0].Exec
		return nil
	}
	rt, err := router.New(routes...)
	if err != nil {
		return err
	}
	e.rt = rt
	return nil
}

// executor is what the orchestrator drives.
func (e *engines) executor() exec.Executor {
	if e.rt != nil {
		return e.rt
	}
	return e.single
}

// pools are the server's pools, for Config.Pools.
func (e *engines) pools() []string { return e.kinds }

// start runs the engines' loops until ctx ends; the first look at the
// Ray cluster's nodes is taken before it returns (bounded by wait), so
// that a submit right after start-up sees them.
func (e *engines) start(ctx context.Context, wait time.Duration) (done <-chan struct{}) {
	ch := make(chan struct{})
	first, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	switch {
	case e.ray != nil:
		e.ray.Poll(first)
		go func() { e.ray.Run(ctx); close(ch) }()
	case e.k8s != nil:
		go func() { e.k8s.Run(ctx); close(ch) }()
		e.k8s.WaitSynced(first) // the nodes' first list
	case e.slurm != nil:
		e.slurm.PollOnce(first)
		go func() { e.slurm.Run(ctx); close(ch) }()
	default:
		close(ch)
	}
	return ch
}
