package ray

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
)

// NodeID is the Corral node id of a Ray node: "ray-" and its IP (':' of
// an IPv6 address becomes '-').
func NodeID(n NodeState) string {
	return "ray-" + strings.ReplaceAll(n.NodeIP, ":", "-")
}

// nodeIP reads a Ray node's IP from its Corral name; ok is false for a
// name that is not one.
func nodeIP(id string) (ip string, ok bool) {
	rest, ok := strings.CutPrefix(id, "ray-")
	if !ok || rest == "" {
		return "", false
	}
	if strings.Contains(rest, ".") && !strings.Contains(rest, "-") {
		return rest, true // IPv4
	}
	return strings.ReplaceAll(rest, "-", ":"), true
}

// registration is what the orchestrator is told of a Ray node: its GPUs
// (resources_total "GPU", their model from "accelerator_type:X") and the
// labels pool=<pool> and ray_node_id=<id>.
func (e *Executor) registration(n NodeState) api.AgentRegistration {
	count := int(math.Floor(n.ResourcesTotal["GPU"]))
	model := ""
	for r := range n.ResourcesTotal {
		if m, ok := strings.CutPrefix(r, "accelerator_type:"); ok {
			model = m
		}
	}
	reg := api.AgentRegistration{NodeID: NodeID(n), Hostname: n.NodeName, Address: n.NodeIP,
		Labels:      map[string]string{"pool": e.cfg.Pool, "ray_node_id": n.NodeID},
		GPUs:        []api.AgentGPU{},
		Containment: api.ContainProcessGroup, Tasks: []api.TaskStatus{}}
	if reg.Hostname == "" {
		reg.Hostname = n.NodeIP
	}
	for i := range count {
		reg.GPUs = append(reg.GPUs, api.AgentGPU{Index: i, Model: model})
	}
	return reg
}

// fingerprint is what makes a registration worth repeating.
func fingerprint(r api.AgentRegistration) string {
	keys := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		keys = append(keys, k+"="+r.Labels[k])
	}
	sort.Strings(keys)
	model := ""
	if len(r.GPUs) > 0 {
		model = r.GPUs[0].Model
	}
	return fmt.Sprintf("%s|%s|%d|%s|%s", r.Hostname, r.Address, len(r.GPUs), model, strings.Join(keys, ","))
}

// syncNodes reads the cluster's alive nodes and tells the orchestrator:
// a new or changed node is registered, every alive one is seen. A node
// that left stops being seen and goes down after the node TTL like an
// agent's. When the head cannot be asked and the breaker is open, every
// node is marked down at once, so that jobs stay queued rather than land
// on a cluster that cannot take them.
func (e *Executor) syncNodes(ctx context.Context) {
	var ns []NodeState
	err := e.call(func() (err error) { ns, err = e.c.nodes(ctx); return err })
	now := e.cfg.Now()
	if err != nil {
		if e.br.Snapshot().State == breaker.Closed {
			e.log.Warn("Ray node list failed", "err", err)
			return
		}
		e.mu.Lock()
		down := !e.downSent
		e.downSent = true
		ids := make([]string, 0, len(e.known))
		for id := range e.known {
			ids = append(ids, id)
		}
		e.nodes = map[string]NodeState{}
		e.mu.Unlock()
		if down {
			e.log.Warn("Ray head unreachable; its nodes are down until it answers", "address", e.cfg.Address, "err", err)
			for _, id := range ids {
				e.cfg.Book.NodeDown(id, now)
			}
		}
		return
	}
	alive := map[string]NodeState{}
	for _, n := range ns {
		if n.State == "ALIVE" && n.NodeIP != "" {
			alive[NodeID(n)] = n
		}
	}
	e.mu.Lock()
	if e.downSent {
		e.log.Info("Ray head answers again", "address", e.cfg.Address, "nodes", len(alive))
	}
	e.downSent, e.polled = false, true
	known := maps.Clone(e.known)
	e.mu.Unlock()
	for id, n := range alive {
		reg := e.registration(n)
		fp := fingerprint(reg)
		if known[id] != fp {
			if err := e.cfg.Book.RegisterNode(ctx, reg, n.NodeIP); err != nil {
				e.log.Warn("Ray node not registered", "node", id, "err", err)
				delete(alive, id)
				continue
			}
			e.log.Info("Ray node registered", "node", id, "gpus", len(reg.GPUs), "ray_node_id", n.NodeID)
			known[id] = fp
		}
		e.cfg.Book.NodeSeen(id, nil, nil, now)
	}
	e.mu.Lock()
	e.known, e.nodes = known, alive
	e.mu.Unlock()
}
