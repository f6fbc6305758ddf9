package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpubook"
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

// state is the node's state for the API (nodebook.State). Its jobs are
// counted only when it drains: a view of a large cluster asks every node.
// Lock held.
func (o *Orchestrator) state(n *Node) string {
	return n.State(func() int { return gpubook.CountOn(n.ID, o.jobs.Active()) })
}

// RegisterNode records a node an agent introduces (new, restarted or
// returning after being down); it is durable before it returns. addr is
// where the agent connected from, used as its address when it gives none.
// The registration's rules are nodebook's (CheckRegistration, and
// Book.Register: 409 node_in_use while another agent holds the node, up
// and heard from within the TTL of the server's attention, liveness.go).
func (o *Orchestrator) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	if err := nodebook.CheckRegistration(reg); err != nil {
		return err
	}
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		o.attend() // a stall just ended does not open a node to another agent
		n, joined, err := o.gpus.Nodes().Register(reg, addr, o.cfg.Now(), o.cfg.NodeTTL)
		if err != nil {
			return nil, err
		}
		switch joined {
		case nodebook.New:
			o.log.Info("node registered", "node", reg.NodeID, "gpus", len(reg.GPUs), "hostname", reg.Hostname)
		case nodebook.Back:
			o.log.Info("node is back", "node", reg.NodeID)
			o.notes.Alert(notify.AlertNodeUp, tx.now, n.ID, nil, "node %s is back up (its agent registered again)", n.ID)
		}
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
		switch {
		case ev.disk != nil:
			if n := o.gpus.Nodes().Get(ev.nodeID); n != nil {
				o.setDiskFull(n, *ev.disk)
			}
		case ev.down:
			if n, down := o.gpus.Nodes().Silent(ev.nodeID); down {
				o.wentDown(n, ev.at) // liveness.go
				flipped = append(flipped, n)
			}
		default:
			if n := o.nodeReport(ev); n != nil {
				flipped = append(flipped, n)
			}
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

// nodeReport applies a node's report (nodebook.Book.Report) and what
// follows in the loop's books: a node back up is alerted; its readings go
// to the alerts, the used GPU time and the idle check. It returns the
// node when it came back up (its state is stored). Write lock held.
func (o *Orchestrator) nodeReport(ev nodeEvent) *Node {
	n, back := o.gpus.Nodes().Report(ev.nodeID, ev.at, ev.readings, ev.foreign)
	if n == nil {
		return nil
	}
	if back {
		o.dirty = true
		o.log.Info("node up", "node", n.ID)
		o.notes.Alert(notify.AlertNodeUp, ev.at, n.ID, nil, "node %s is back up", n.ID)
	}
	o.notes.NodeReadings(n.ID, ev.readings, ev.foreign, ev.at)
	if ev.readings != nil {
		o.spend.IntegrateReadings(n.ID, ev.readings, ev.at) // feature/spend: used GPU time
		o.checkIdle(n, ev.at)
	}
	if len(ev.foreign) > 0 {
		o.dirty = true // foreign GPUs are not handed out
	}
	if back {
		return n
	}
	return nil
}

// SetNodeState cordons, drains or uncordons a node (nodebook.Book.Act);
// persisted.
func (o *Orchestrator) SetNodeState(ctx context.Context, nodeID, action string) (api.NodeAction, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		n, err := o.gpus.Nodes().Act(nodeID, action)
		if err != nil {
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
	return o.gpus.Nodes().Samples(nodeID, since)
}

// checkIdle flags running jobs whose GPUs on the node have stayed under the
// idle threshold for the idle window, and clears the flag when they work
// again (gpubook.Idle); here is what follows: a log line, the
// notification, a cycle when the policy preempts idle jobs. Write lock
// held.
func (o *Orchestrator) checkIdle(n *Node, at time.Time) {
	rule := nodebook.IdleRule{Threshold: o.policy.IdleThreshold, Window: o.policy.IdleWindow.Duration()}
	idle, busy := gpubook.Idle(rule, n, o.jobs.Active(), at)
	for _, j := range busy {
		o.log.Info("job busy again", "job_id", j.ID)
	}
	for _, j := range idle {
		o.notes.Job(j, notify.JobIdle, at)
		if o.policy.IdleAction == IdlePreempt {
			o.dirty = true
		}
		o.log.Warn("job idle: its GPUs are under the threshold", "job_id", j.ID, "user", j.User,
			"threshold_pct", o.policy.IdleThreshold, "since", j.IdleSince, "action", o.policy.IdleAction)
	}
}
