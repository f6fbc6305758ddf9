package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/ring"
)

// Node states as the API shows them (package nodebook).
const (
	NodeUp       = nodebook.Up
	NodeDown     = nodebook.Down
	NodeCordoned = nodebook.Cordoned
	NodeDraining = nodebook.Draining
	NodeDrained  = nodebook.Drained
)

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
type Sample = nodebook.Sample

// nodeRecord is a node as the store keeps it.
type nodeRecord = nodebook.Record

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
	if tx.batch.Nodes == nil {
		tx.batch.Nodes = map[string]string{}
	}
	tx.batch.Nodes[n.ID] = n.record().Encode()
}

// node returns the node with the given id. Lock held (or loop).
func (o *Orchestrator) node(id string) *Node {
	if i, ok := o.reg.index[id]; ok {
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
	o.reg.index[n.ID] = len(o.nodes)
	o.nodes = append(o.nodes, n)
	return &o.nodes[len(o.nodes)-1]
}

// state is the node's state for the API (nodebook.State). Its jobs are
// counted only when it drains: a view of a large cluster asks every node.
// Lock held.
func (o *Orchestrator) state(n *Node) string {
	active := 0
	if n.draining && !n.down {
		active = o.activeOn(n.ID)
	}
	return nodebook.State(n.down, n.cordoned, n.draining, active)
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
	if err := nodebook.CheckRegistration(reg); err != nil {
		return err
	}
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		o.attend() // a stall just ended does not open a node to another agent
		now := o.cfg.Now()
		n := o.node(reg.NodeID)
		if n != nil && !n.static && !n.down && n.agent != "" && n.agent != nodebook.AgentHash(reg.AgentID) {
			if err := nodebook.InUse(reg.NodeID, o.silentFor(n, now), o.cfg.NodeTTL); err != nil {
				return nil, err
			}
		}
		if n == nil {
			n = o.addNode(Node{ID: reg.NodeID})
			o.log.Info("node registered", "node", reg.NodeID, "gpus", len(reg.GPUs), "hostname", reg.Hostname)
		} else if n.down {
			o.log.Info("node is back", "node", reg.NodeID)
			o.notes.Alert(notify.AlertNodeUp, tx.now, n.ID, nil, "node %s is back up (its agent registered again)", n.ID)
		}
		fresh := nodeFromRecord(n.record().Register(reg, addr))
		fresh.Telemetry, fresh.lastSeen = n.Telemetry, now
		fresh.history = n.history
		fresh.diskFull = nodebook.DiskNote(reg.DiskFull) // disk.go
		*n = fresh
		tx.persistNode(n)
		o.dirty = true
		return nil, nil
	})
	return err
}

// nodeRegistry is what the loop keeps beside o.nodes: where each node
// is in it, its look at its own clock for liveness (package nodebook),
// and the node news waiting for it. index and watch are guarded by o.mu;
// events has a lock of its own: any goroutine pushes news without
// waiting for the loop.
type nodeRegistry struct {
	index  map[string]int   // node id -> position in o.nodes
	watch  nodebook.Watch   // the loop's last look at Config.Clock (liveness.go)
	events queue[nodeEvent] // NodeSeen, NodeDown, NodeDisk
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
	o.reg.events.push(nodeEvent{nodeID: nodeID, at: at, readings: readings, foreign: foreign})
}

// NodeDown records that a node went silent past its TTL. It never blocks.
func (o *Orchestrator) NodeDown(nodeID string, at time.Time) {
	o.reg.events.push(nodeEvent{nodeID: nodeID, at: at, down: true})
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
	n.history.Push(s, nodebook.HistoryLen)
}

// SetNodeState cordons, drains or uncordons a node; persisted.
func (o *Orchestrator) SetNodeState(ctx context.Context, nodeID, action string) (api.NodeAction, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		n := o.node(nodeID)
		if n == nil {
			return nil, api.NotFound("no node %q", nodeID)
		}
		var err error
		if n.cordoned, n.draining, err = nodebook.Act(action, n.cordoned, n.draining); err != nil {
			return nil, err
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
	rule := nodebook.IdleRule{Threshold: o.policy.IdleThreshold, Window: o.policy.IdleWindow.Duration()}
	for id := range o.active {
		j := o.jobs[id]
		if j.State != api.StateRunning {
			continue
		}
		switch rule.Check(j, n.ID, util, at) {
		case nodebook.IdleBusy:
			if j.Idle {
				o.log.Info("job busy again", "job_id", id)
			}
			j.Idle, j.IdleSince = false, nil
		case nodebook.IdleBegan:
			t := at
			j.IdleSince = &t
		case nodebook.IdleNow:
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
