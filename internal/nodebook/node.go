package nodebook

import (
	"maps"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/ring"
)

// Node is a node the orchestrator schedules on. Nodes come from agents that
// register; a node given in the orchestrator's Config (tests, embedding)
// is up from the start. The orchestrator keeps them in its books and
// changes them only through these methods, from its loop with its write
// lock held; the exported fields are what an embedder gives.
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

	agent    string      // AgentHash of the agent that registered it last; "": none
	domain   map[int]int // GPU index -> NVLink domain (see NVLinkDomains)
	static   bool        // given in Config: never times out
	down     bool
	cordoned bool
	draining bool
	lastSeen time.Time
	// grace: the node's silence counts from here when later than
	// lastSeen: the server's start, or the end of its last stall.
	grace    time.Time
	readings []api.GPUReading
	foreign  []api.ForeignProcess
	history  ring.Ring[Sample]
	diskFull string // the agent says its log disk is full; "": it is not
}

// Record is the node as the store keeps it.
func (n *Node) Record() Record {
	r := Record{ID: n.ID, Hostname: n.Hostname, Address: n.Address, Labels: n.Labels, Simulated: n.Simulated,
		Cordoned: n.cordoned, Draining: n.draining, Agent: n.agent, GPUs: []api.AgentGPU{}, Containment: n.Containment, Down: n.down && !n.static}
	for _, d := range n.Devices {
		r.GPUs = append(r.GPUs, api.AgentGPU{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB, NVLinkPeers: d.NVLinkPeers, Simulated: d.Simulated, MIG: d.MIG, Shared: d.Shared})
	}
	return r
}

// FromRecord is the node a stored record describes, with its pool label
// and NVLink domains.
func FromRecord(r Record) Node {
	n := Node{ID: r.ID, Hostname: r.Hostname, Address: r.Address, Labels: WithPool(r.Labels), Simulated: r.Simulated,
		cordoned: r.Cordoned, draining: r.Draining, agent: r.Agent, Containment: r.Containment, down: r.Down}
	for _, g := range r.GPUs {
		n.Devices = append(n.Devices, gpuinfo.Device{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB, NVLinkPeers: g.NVLinkPeers, Simulated: g.Simulated, MIG: g.MIG, Shared: g.Shared})
	}
	n.domain = NVLinkDomains(n.Devices)
	return n
}

// Prepare readies a node given by an embedder or read back for the books:
// its NVLink domains when it has none yet, and its pool label.
func (n *Node) Prepare() {
	if n.domain == nil {
		n.domain = NVLinkDomains(n.Devices)
	}
	n.Labels = WithPool(n.Labels)
}

// MakeStatic marks a node given in Config: seen at now, it never times out.
func (n *Node) MakeStatic(now time.Time) { n.static, n.lastSeen = true, now }

// Reregistered is the node after its agent registers again with reg from
// addr at now (Record.Register says what changes); the server's own
// telemetry source and the samples are kept.
func (n *Node) Reregistered(reg api.AgentRegistration, addr string, now time.Time) Node {
	fresh := FromRecord(n.Record().Register(reg, addr))
	fresh.Telemetry, fresh.lastSeen = n.Telemetry, now
	fresh.history = n.history
	fresh.diskFull = DiskNote(reg.DiskFull)
	return fresh
}

// HeldByOther reports whether an agent other than agentID holds the node:
// a registered node that is up, not given in Config, with another agent.
func (n *Node) HeldByOther(agentID string) bool {
	return !n.static && !n.down && n.agent != "" && n.agent != AgentHash(agentID)
}

// Static reports whether the node was given in Config.
func (n *Node) Static() bool { return n.static }

// IsDown reports whether the node is down.
func (n *Node) IsDown() bool { return n.down }

// Draining reports whether the node drains (down or not).
func (n *Node) Draining() bool { return n.draining }

// Schedulable reports whether new jobs may start on the node: up, neither
// cordoned nor draining, and its log disk not full.
func (n *Node) Schedulable() bool { return !n.down && !n.cordoned && !n.draining && n.diskFull == "" }

// Act applies an admin's action (package-level Act) to the node.
func (n *Node) Act(action string) error {
	var err error
	n.cordoned, n.draining, err = Act(action, n.cordoned, n.draining)
	return err
}

// State is the node's state for the API (package-level State); active
// counts its jobs, asked only when it drains.
func (n *Node) State(active func() int) string {
	a := 0
	if n.draining && !n.down {
		a = active()
	}
	return State(n.down, n.cordoned, n.draining, a)
}

// MarkDown marks the node down.
func (n *Node) MarkDown() { n.down = true }

// MarkUp marks the node up; its silence counts from grace when that is
// after its last report (zero: from its last report).
func (n *Node) MarkUp(grace time.Time) {
	n.down = false
	if !grace.IsZero() {
		n.grace = grace
	}
}

// LastSeen is when the node last reported (zero: never).
func (n *Node) LastSeen() time.Time { return n.lastSeen }

// SilentSince is when the node's silence began to count.
func (n *Node) SilentSince() time.Time { return SilentSince(n.lastSeen, n.grace) }

// Forgive moves the start of the node's silence forward by a stall of
// the server.
func (n *Node) Forgive(stall time.Duration) { n.grace = n.SilentSince().Add(stall) }

// GraceFrom gives the node a TTL from t to report again.
func (n *Node) GraceFrom(t time.Time) { n.grace = t }

// Seen applies a sync of the node at at: its last sight never moves back
// in time, its foreign processes are replaced, and its readings (when the
// sync has any) replaced and kept as a sample.
func (n *Node) Seen(at time.Time, readings []api.GPUReading, foreign []api.ForeignProcess) {
	if at.After(n.lastSeen) {
		n.lastSeen = at
	}
	n.foreign = foreign
	if readings != nil {
		n.readings = readings
		n.RecordSample(Sample{At: at, Readings: readings})
	}
}

// RecordSample adds a telemetry sample to the node's history.
func (n *Node) RecordSample(s Sample) { n.history.Push(s, HistoryLen) }

// Samples is the node's telemetry since a time, oldest first.
func (n *Node) Samples(since time.Time) []Sample {
	out := []Sample{}
	for s := range n.history.All() {
		if !s.At.Before(since) {
			out = append(out, *s)
		}
	}
	return out
}

// Readings is the node's last GPU readings.
func (n *Node) Readings() []api.GPUReading { return n.readings }

// Util is a GPU's last utilization, and whether the node reported it.
func (n *Node) Util(gpu int) (int, bool) {
	for _, rd := range n.readings {
		if rd.Index == gpu {
			return rd.Utilization, true
		}
	}
	return 0, false
}

// DiskFull is the agent's note that the node's log disk is full ("": it
// is not).
func (n *Node) DiskFull() string { return n.diskFull }

// SetDiskFull sets the note and says what the change means.
func (n *Node) SetDiskFull(full string) Disk {
	c := DiskChange(n.diskFull, full)
	n.diskFull = full
	return c
}

// Model is the node's GPU model ("" without GPUs; the first device's
// model when they differ).
func (n *Node) Model() string {
	if len(n.Devices) == 0 {
		return ""
	}
	return n.Devices[0].Model
}

// Pool is the node's pool: its label, else agents (nodes registered
// before pools existed, and static nodes).
func (n *Node) Pool() string {
	if p := n.Labels[jobspec.PoolLabel]; p != "" {
		return p
	}
	return api.PoolAgents
}

// ContainmentShown is the node's containment as shown: process-group
// when its agent did not say.
func (n *Node) ContainmentShown() string {
	if n.Containment == "" {
		return api.ContainProcessGroup
	}
	return n.Containment
}

// WithPool returns labels with the pool label set: as they are when they
// name a pool, else a copy naming agents' pool. Every node carries its
// pool, so that a job's requirement pool=agents matches nodes registered
// without one.
func WithPool(labels map[string]string) map[string]string {
	if labels[jobspec.PoolLabel] != "" {
		return labels
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[jobspec.PoolLabel] = api.PoolAgents
	return out
}
