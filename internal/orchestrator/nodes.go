package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/ring"
)

// Node states as the API shows them.
const (
	NodeUp       = "up"
	NodeDown     = "down"     // silent past its TTL (liveness.go)
	NodeCordoned = "cordoned" // nothing new starts; running jobs go on
	NodeDraining = "draining" // cordoned until its jobs end
	NodeDrained  = "drained"  // draining, and no job is left
)

// historyLen is how many telemetry samples a node keeps (at the default
// 5 s interval, an hour).
const historyLen = 720

// Node is a node the orchestrator schedules on. Nodes come from agents that
// register; a node given in Config (tests, embedding) is up from the start.
type Node struct {
	ID        string
	Hostname  string
	Address   string // where other nodes reach it: a gang's CORRAL_MASTER_ADDR
	Labels    map[string]string
	Devices   []gpuinfo.Device
	Telemetry gpuinfo.Source // readings taken by the server itself; nil: from the agent's reports
	Simulated bool
	// Containment is how its agent holds jobs (api.Node's containment).
	Containment string

	agent    string      // hex SHA-256 of the id of the agent that registered it last; "": none
	domain   map[int]int // GPU index -> NVLink domain (see nvlinkDomains)
	static   bool        // given in Config: never times out
	down     bool
	cordoned bool
	draining bool
	lastSeen time.Time
	// grace: the node's silence counts from here when later than
	// lastSeen: the server's start, or the end of its last stall
	// (liveness.go).
	grace    time.Time
	readings []api.GPUReading
	foreign  []api.ForeignProcess
	history  ring.Ring[Sample]
	diskFull string // the agent says its log disk is full (disk.go); "": it is not
}

// Sample is one telemetry reading of a node, kept for graphs.
type Sample struct {
	At       time.Time        `json:"at"`
	Readings []api.GPUReading `json:"readings"`
}

// nodeRecord is a node as the store keeps it.
type nodeRecord struct {
	ID        string            `json:"id"`
	Hostname  string            `json:"hostname"`
	Address   string            `json:"address,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	GPUs      []api.AgentGPU    `json:"gpus"`
	Simulated bool              `json:"simulated,omitempty"`
	Cordoned  bool              `json:"cordoned,omitempty"`
	Draining  bool              `json:"draining,omitempty"`
	Agent     string            `json:"agent,omitempty"` // Node.agent
	// Down: it was down when last stored, and stays down after a restart
	// until its agent registers again (liveness.go).
	Down bool `json:"down,omitempty"`
	// Containment: as registered (api.AgentRegistration).
	Containment string `json:"containment,omitempty"`
}

func (n *Node) record() nodeRecord {
	r := nodeRecord{ID: n.ID, Hostname: n.Hostname, Address: n.Address, Labels: n.Labels, Simulated: n.Simulated,
		Cordoned: n.cordoned, Draining: n.draining, Agent: n.agent, GPUs: []api.AgentGPU{}, Containment: n.Containment, Down: n.down && !n.static}
	for _, d := range n.Devices {
		r.GPUs = append(r.GPUs, api.AgentGPU{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB, NVLinkPeers: d.NVLinkPeers, Simulated: d.Simulated, MIG: d.MIG, Shared: d.Shared})
	}
	return r
}

func nodeFromRecord(r nodeRecord) Node {
	n := Node{ID: r.ID, Hostname: r.Hostname, Address: r.Address, Labels: withPool(r.Labels), Simulated: r.Simulated,
		cordoned: r.Cordoned, draining: r.Draining, agent: r.Agent, Containment: r.Containment, down: r.Down}
	for _, g := range r.GPUs {
		n.Devices = append(n.Devices, gpuinfo.Device{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB, NVLinkPeers: g.NVLinkPeers, Simulated: g.Simulated, MIG: g.MIG, Shared: g.Shared})
	}
	n.domain = nvlinkDomains(n.Devices)
	return n
}

// persistNode writes the node's record in the transaction.
func (tx *txn) persistNode(n *Node) {
	raw, _ := json.Marshal(n.record())
	if tx.batch.Nodes == nil {
		tx.batch.Nodes = map[string]string{}
	}
	tx.batch.Nodes[n.ID] = string(raw)
}

// node returns the node with the given id. Lock held (or loop).
func (o *Orchestrator) node(id string) *Node {
	if i, ok := o.nodeIndex[id]; ok {
		return &o.nodes[i]
	}
	return nil
}

// addNode appends a node to the registry. Write lock held.
func (o *Orchestrator) addNode(n Node) *Node {
	if n.domain == nil {
		n.domain = nvlinkDomains(n.Devices)
	}
	n.Labels = withPool(n.Labels) // pools.go
	o.nodeIndex[n.ID] = len(o.nodes)
	o.nodes = append(o.nodes, n)
	return &o.nodes[len(o.nodes)-1]
}

// state is the node's state for the API.
func (o *Orchestrator) state(n *Node) string {
	switch {
	case n.down:
		return NodeDown
	case n.draining && o.activeOn(n.ID) == 0:
		return NodeDrained
	case n.draining:
		return NodeDraining
	case n.cordoned:
		return NodeCordoned
	}
	return NodeUp
}

// schedulable reports whether new jobs may start on the node.
func (n *Node) schedulable() bool { return !n.down && !n.cordoned && !n.draining }

// activeOn counts the jobs placed on a node, jobs of no GPUs included.
// Lock held.
func (o *Orchestrator) activeOn(nodeID string) int {
	c := 0
	for id := range o.active {
		if placedOn(o.jobs[id], nodeID) {
			c++
		}
	}
	return c
}

// RegisterNode records a node an agent introduces (new, restarted or
// returning after being down); it is durable before it returns. addr is
// where the agent connected from, used as its address when it gives none.
// The agent that registered a node last is kept with it (as a hash of its
// id): while the node is up and heard from within the TTL (after a server
// restart: the TTL from the start), another agent's registration is
// refused with 409 node_in_use, as the agent pool refuses it while it
// knows the holder. The TTL is of the server's attention (liveness.go):
// a stall of the server does not count.
func (o *Orchestrator) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	if !userName.MatchString(reg.NodeID) || len(reg.NodeID) > 128 {
		return api.Invalid("node_id", "%q is not a valid node name (letters, digits, '_', '.', '@', '-')", truncate(reg.NodeID, 40))
	}
	if len(reg.GPUs) > 1024 || len(reg.Labels) > 64 {
		return api.Invalid("gpus", "too many GPUs or labels")
	}
	if err := validContainment(reg.Containment); err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, g := range reg.GPUs {
		if g.Index < 0 || g.Index > 1023 || seen[g.Index] || g.MemoryMiB < 0 {
			return api.Invalid("gpus", "GPU index %d is out of range, repeated, or has negative memory", g.Index)
		}
		seen[g.Index] = true
	}
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		o.attend() // a stall just ended does not open a node to another agent
		now := o.cfg.Now()
		n := o.node(reg.NodeID)
		agent := agentHash(reg.AgentID)
		if n != nil && !n.static && !n.down && n.agent != "" && n.agent != agent {
			if idle := o.silentFor(n, now); idle < o.cfg.NodeTTL {
				return nil, &api.Error{Status: http.StatusConflict, Code: "node_in_use", Field: "node_id", Message: fmt.Sprintf(
					"node %s is held by another agent, last heard %s ago; stop it, or give this agent another --node-name (or wait %s for the other to count as gone)",
					reg.NodeID, idle.Round(time.Millisecond), (o.cfg.NodeTTL - idle).Round(time.Second))}
			}
		}
		if n == nil {
			n = o.addNode(Node{ID: reg.NodeID})
			o.log.Info("node registered", "node", reg.NodeID, "gpus", len(reg.GPUs), "hostname", reg.Hostname)
		} else if n.down {
			o.log.Info("node is back", "node", reg.NodeID)
			o.notes.Alert(notify.AlertNodeUp, tx.now, n.ID, nil, "node %s is back up (its agent registered again)", n.ID)
		}
		rec := n.record()
		rec.Hostname, rec.Labels, rec.Simulated = reg.Hostname, maps.Clone(reg.Labels), reg.Simulated
		rec.Address = reg.Address
		if rec.Address == "" {
			rec.Address = addr
		}
		rec.GPUs = slices.Clone(reg.GPUs)
		rec.Agent = agent
		rec.Containment = reg.Containment
		rec.Down = false
		fresh := nodeFromRecord(rec)
		fresh.Telemetry, fresh.lastSeen = n.Telemetry, now
		fresh.history = n.history
		fresh.diskFull = diskNote(reg.DiskFull) // disk.go
		*n = fresh
		tx.persistNode(n)
		o.dirty = true
		return nil, nil
	})
	return err
}

// agentHash is how a node record keeps its agent's id: hashed, since the
// id is what lets an agent take its node back. "" for no id.
func agentHash(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// nodeEvent is telemetry or liveness news about a node, applied by the loop.
type nodeEvent struct {
	nodeID   string
	at       time.Time
	down     bool
	readings []api.GPUReading
	foreign  []api.ForeignProcess
	disk     *string // NodeDisk: the node's log disk state (disk.go)
}

// NodeSeen records a node's sync: it is alive, with these readings. It
// never blocks.
func (o *Orchestrator) NodeSeen(nodeID string, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time) {
	o.nodeEvents.push(nodeEvent{nodeID: nodeID, at: at, readings: readings, foreign: foreign})
}

// NodeDown records that a node went silent past its TTL. It never blocks.
func (o *Orchestrator) NodeDown(nodeID string, at time.Time) {
	o.nodeEvents.push(nodeEvent{nodeID: nodeID, at: at, down: true})
}

// applyNodeEvents applies node news. A node that goes down or comes back
// up is stored so, so that a restart keeps it down until its agent
// reports. A report never moves a node's last sight back in time (news
// queued behind a stall may arrive after newer news). Loop only.
func (o *Orchestrator) applyNodeEvents(ctx context.Context, evs []nodeEvent) {
	if len(evs) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applyNodeEventsLocked(ctx, evs)
}

// applyNodeEventsLocked is applyNodeEvents with the write lock held.
func (o *Orchestrator) applyNodeEventsLocked(ctx context.Context, evs []nodeEvent) {
	if len(evs) == 0 {
		return
	}
	var flipped []*Node
	for _, ev := range evs {
		n := o.node(ev.nodeID)
		if n == nil {
			continue
		}
		if ev.disk != nil {
			o.setDiskFull(n, *ev.disk)
			continue
		}
		if ev.down {
			if !n.down {
				o.markDown(n, ev.at) // liveness.go
				flipped = append(flipped, n)
			}
			continue
		}
		if n.down {
			n.down = false
			flipped = append(flipped, n)
			o.dirty = true
			o.log.Info("node up", "node", n.ID)
			o.notes.Alert(notify.AlertNodeUp, ev.at, n.ID, nil, "node %s is back up", n.ID)
		}
		o.notes.NodeReadings(n.ID, ev.readings, ev.foreign, ev.at)
		if ev.at.After(n.lastSeen) {
			n.lastSeen = ev.at
		}
		n.foreign = ev.foreign
		if ev.readings != nil {
			o.spend.IntegrateReadings(n.ID, ev.readings, ev.at) // feature/spend: used GPU time
			n.readings = ev.readings
			n.recordSample(Sample{At: ev.at, Readings: ev.readings})
			o.checkIdle(n, ev.at)
		}
		if len(ev.foreign) > 0 {
			o.dirty = true // foreign GPUs are not handed out
		}
	}
	if len(flipped) > 0 {
		tx := o.begin()
		for _, n := range flipped {
			if !n.static {
				tx.persistNode(n)
			}
		}
		if err := o.commit(ctx, tx); err != nil {
			o.log.Error("node states not committed", "err", err)
		}
	}
	o.notify()
}

// recordSample adds a telemetry sample to the node's history.
func (n *Node) recordSample(s Sample) {
	n.history.Push(s, historyLen)
}

// SetNodeState cordons, drains or uncordons a node; persisted.
func (o *Orchestrator) SetNodeState(ctx context.Context, nodeID, action string) (api.NodeAction, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		n := o.node(nodeID)
		if n == nil {
			return nil, api.NotFound("no node %q", nodeID)
		}
		switch action {
		case "cordon":
			n.cordoned = true
		case "drain":
			n.draining = true
		case "uncordon":
			n.cordoned, n.draining = false, false
		default:
			return nil, api.NotFound("no node action %q; use cordon, drain or uncordon", action)
		}
		tx.persistNode(n)
		o.dirty = true
		o.log.Info("node "+action, "node", nodeID)
		return api.NodeAction{NodeID: nodeID, State: o.state(n)}, nil
	})
	if err != nil {
		return api.NodeAction{}, err
	}
	return v.(api.NodeAction), nil
}

// History returns a node's telemetry samples since a time, oldest first.
func (o *Orchestrator) History(nodeID string, since time.Time) ([]Sample, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	n := o.node(nodeID)
	if n == nil {
		return nil, api.NotFound("no node %q", nodeID)
	}
	out := []Sample{}
	for s := range n.history.All() {
		if !s.At.Before(since) {
			out = append(out, *s)
		}
	}
	return out, nil
}

// checkIdle flags running jobs whose GPUs on the node have stayed under the
// idle threshold for the idle window, and clears the flag when they work
// again. Write lock held.
func (o *Orchestrator) checkIdle(n *Node, at time.Time) {
	util := make(map[int]int, len(n.readings))
	for _, r := range n.readings {
		util[r.Index] = r.Utilization
	}
	for id := range o.active {
		j := o.jobs[id]
		if j.State != api.StateRunning {
			continue
		}
		mine, busy := false, false
		for _, a := range j.Allocation {
			if a.NodeID == n.ID {
				mine = true
				if u, ok := util[a.GPUID]; !ok || u >= o.policy.IdleThreshold {
					busy = true
				}
			}
		}
		switch {
		case !mine:
		case busy:
			if j.Idle {
				o.log.Info("job busy again", "job_id", id)
			}
			j.Idle, j.IdleSince = false, nil
		case j.IdleSince == nil:
			t := at
			j.IdleSince = &t
		case !j.Idle && at.Sub(*j.IdleSince) >= o.policy.IdleWindow.Duration():
			j.Idle = true
			o.notes.Job(j, notify.JobIdle, at)
			if o.policy.IdleAction == IdlePreempt {
				o.dirty = true
			}
			o.log.Warn("job idle: its GPUs are under the threshold", "job_id", id, "user", j.User,
				"threshold_pct", o.policy.IdleThreshold, "since", j.IdleSince, "action", o.policy.IdleAction)
		}
	}
}
