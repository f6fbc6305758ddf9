package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/notify"
)

// Node states as the API shows them (package nodebook).
const (
	NodeUp       = nodebook.Up
	NodeDown     = nodebook.Down
	NodeCordoned = nodebook.Cordoned
	NodeDraining = nodebook.Draining
	NodeDrained  = nodebook.Drained
)

// Node is a node the orchestrator schedules on (package nodebook).
type Node = nodebook.Node

// Sample is one telemetry reading of a node, kept for graphs.
type Sample = nodebook.Sample

// persistNode writes the node's record in the transaction.
func (tx *txn) persistNode(n *Node) {
	if tx.batch.Nodes == nil {
		tx.batch.Nodes = map[string]string{}
	}
	tx.batch.Nodes[n.ID] = n.Record().Encode()
}

// node returns the node with the given id. Lock held (or loop).
func (o *Orchestrator) node(id string) *Node { return o.nodes.Get(id) }

// addNode appends a node to the registry. Write lock held.
func (o *Orchestrator) addNode(n Node) *Node { return o.nodes.Add(n) }

// state is the node's state for the API (nodebook.State). Its jobs are
// counted only when it drains: a view of a large cluster asks every node.
// Lock held.
func (o *Orchestrator) state(n *Node) string {
	return n.State(func() int { return o.activeOn(n.ID) })
}

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
		if n != nil && n.HeldByOther(reg.AgentID) {
			if err := nodebook.InUse(reg.NodeID, o.silentFor(n, now), o.cfg.NodeTTL); err != nil {
				return nil, err
			}
		}
		if n == nil {
			n = o.addNode(Node{ID: reg.NodeID})
			o.log.Info("node registered", "node", reg.NodeID, "gpus", len(reg.GPUs), "hostname", reg.Hostname)
		} else if n.IsDown() {
			o.log.Info("node is back", "node", reg.NodeID)
			o.notes.Alert(notify.AlertNodeUp, tx.now, n.ID, nil, "node %s is back up (its agent registered again)", n.ID)
		}
		*n = n.Reregistered(reg, addr, now)
		tx.persistNode(n)
		o.dirty = true
		return nil, nil
	})
	return err
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
	o.news.push(nodeEvent{nodeID: nodeID, at: at, readings: readings, foreign: foreign})
}

// NodeDown records that a node went silent past its TTL. It never blocks.
func (o *Orchestrator) NodeDown(nodeID string, at time.Time) {
	o.news.push(nodeEvent{nodeID: nodeID, at: at, down: true})
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
			if !n.IsDown() {
				o.markDown(n, ev.at) // liveness.go
				flipped = append(flipped, n)
			}
			continue
		}
		if n.IsDown() {
			n.MarkUp(time.Time{})
			flipped = append(flipped, n)
			o.dirty = true
			o.log.Info("node up", "node", n.ID)
			o.notes.Alert(notify.AlertNodeUp, ev.at, n.ID, nil, "node %s is back up", n.ID)
		}
		o.notes.NodeReadings(n.ID, ev.readings, ev.foreign, ev.at)
		n.Seen(ev.at, ev.readings, ev.foreign)
		if ev.readings != nil {
			o.spend.IntegrateReadings(n.ID, ev.readings, ev.at) // feature/spend: used GPU time
			o.checkIdle(n, ev.at)
		}
		if len(ev.foreign) > 0 {
			o.dirty = true // foreign GPUs are not handed out
		}
	}
	if len(flipped) > 0 {
		tx := o.begin()
		for _, n := range flipped {
			if !n.Static() {
				tx.persistNode(n)
			}
		}
		if err := o.commit(ctx, tx); err != nil {
			o.log.Error("node states not committed", "err", err)
		}
	}
	o.notify()
}

// SetNodeState cordons, drains or uncordons a node; persisted.
func (o *Orchestrator) SetNodeState(ctx context.Context, nodeID, action string) (api.NodeAction, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		n := o.node(nodeID)
		if n == nil {
			return nil, api.NotFound("no node %q", nodeID)
		}
		if err := n.Act(action); err != nil {
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
	return n.Samples(since), nil
}

// checkIdle flags running jobs whose GPUs on the node have stayed under the
// idle threshold for the idle window, and clears the flag when they work
// again. Write lock held.
func (o *Orchestrator) checkIdle(n *Node, at time.Time) {
	util := make(map[int]int, len(n.Readings()))
	for _, r := range n.Readings() {
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
