// Package router is the executor of a mixed cluster: a server that drives
// its own agents and one engine (Ray, Slurm) at once. Each task goes to the
// executor that owns its node; stops and notices follow the task to where
// it was sent.
package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

// Route is one executor and the nodes it owns.
type Route struct {
	Name string // "agents", "ray", "slurm"
	Pool string // the pool label of its nodes
	Exec exec.Executor
	// Owns says whether a node is this executor's. Nil: the default route,
	// which owns every node no other route owns.
	Owns func(nodeID string) bool
}

type key struct {
	job     string
	attempt int
}

// Router is an exec.Executor, exec.Adopter, exec.Noticer and exec.Settler
// over routes.
// It is safe for concurrent use.
type Router struct {
	routes []Route

	mu   sync.Mutex
	sent map[key]int // task -> index of the route it went to
}

// New returns a router; exactly one route must have a nil Owns (the
// default), and it is tried last.
func New(routes ...Route) (*Router, error) {
	var def []Route
	var rest []Route
	for _, r := range routes {
		if r.Exec == nil {
			return nil, fmt.Errorf("router: route %s has no executor", r.Name)
		}
		if r.Owns == nil {
			def = append(def, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(def) != 1 {
		return nil, errors.New("router: want exactly one default route")
	}
	return &Router{routes: append(rest, def...), sent: map[key]int{}}, nil
}

// Routes lists the routes, the default last.
func (r *Router) Routes() []Route { return r.routes }

// route is the index of the route that owns node.
func (r *Router) route(node string) int {
	for i, rt := range r.routes {
		if rt.Owns == nil || rt.Owns(node) {
			return i
		}
	}
	return len(r.routes) - 1
}

// routeOf picks the route of a task: its ranks must all be on one
// executor's nodes.
func (r *Router) routeOf(t exec.Task) (int, error) {
	i := r.route(t.NodeID)
	for _, rk := range t.Ranks {
		if j := r.route(rk.NodeID); j != i {
			return 0, fmt.Errorf("router: job %s spans nodes of %s and %s; a gang runs in one pool", t.JobID, r.routes[i].Name, r.routes[j].Name)
		}
	}
	return i, nil
}

// Start sends the task to the executor of its nodes.
func (r *Router) Start(ctx context.Context, t exec.Task) error {
	i, err := r.routeOf(t)
	if err != nil {
		return err
	}
	r.remember(t, i)
	if err := r.routes[i].Exec.Start(ctx, t); err != nil {
		r.forget(t.JobID, t.Attempt)
		return err
	}
	return nil
}

// Adopt hands a task that ran before a restart to the executor of its
// nodes; one that cannot adopt gets it started again is not an option, so
// that is an error.
func (r *Router) Adopt(ctx context.Context, t exec.Task) error {
	i, err := r.routeOf(t)
	if err != nil {
		return err
	}
	a, ok := r.routes[i].Exec.(exec.Adopter)
	if !ok {
		return fmt.Errorf("router: the %s executor cannot adopt job %s", r.routes[i].Name, t.JobID)
	}
	r.remember(t, i)
	return a.Adopt(ctx, t)
}

// Stop goes to the executor the attempt was sent to; an attempt the
// router never saw is stopped everywhere (stopping what does not run is
// no error).
func (r *Router) Stop(ctx context.Context, jobID string, attempt int, grace time.Duration) error {
	r.mu.Lock()
	i, ok := r.sent[key{jobID, attempt}]
	r.mu.Unlock()
	if ok {
		return r.routes[i].Exec.Stop(ctx, jobID, attempt, grace)
	}
	var errs []error
	for _, rt := range r.routes {
		errs = append(errs, rt.Exec.Stop(ctx, jobID, attempt, grace))
	}
	return errors.Join(errs...)
}

// Notice is passed to the attempt's executor when it can warn.
func (r *Router) Notice(ctx context.Context, jobID string, attempt int, text string) error {
	r.mu.Lock()
	i, ok := r.sent[key{jobID, attempt}]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	if n, can := r.routes[i].Exec.(exec.Noticer); can {
		return n.Notice(ctx, jobID, attempt, text)
	}
	return nil
}

// Settled is passed to every executor that keeps ended attempts until
// they are settled (exec.Settler): the router forgot where the attempt
// went when it ended, and settling one an executor does not keep is a
// no-op.
func (r *Router) Settled(jobID string, attempt int) {
	for _, rt := range r.routes {
		if s, ok := rt.Exec.(exec.Settler); ok {
			s.Settled(jobID, attempt)
		}
	}
}

// Health lists every route's health; a route whose executor reports none
// is listed by name and pool.
func (r *Router) Health() []exec.Health {
	var out []exec.Health
	for _, rt := range r.routes {
		if h, ok := rt.Exec.(exec.HealthReporter); ok {
			out = append(out, h.Health()...)
			continue
		}
		out = append(out, exec.Health{Name: rt.Name, Pool: rt.Pool})
	}
	return out
}

// Sink wraps an executor's sink so that the router forgets attempts that
// ended. Every routed executor's sink should go through it.
func (r *Router) Sink(next exec.Sink) exec.Sink {
	return func(u exec.Update) {
		if u.Kind == exec.Exited {
			r.forget(u.JobID, u.Attempt)
		}
		next(u)
	}
}

func (r *Router) remember(t exec.Task, i int) {
	r.mu.Lock()
	r.sent[key{t.JobID, t.Attempt}] = i
	r.mu.Unlock()
}

func (r *Router) forget(job string, attempt int) {
	r.mu.Lock()
	delete(r.sent, key{job, attempt})
	r.mu.Unlock()
}
