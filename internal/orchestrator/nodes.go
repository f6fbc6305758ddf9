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

// NodeSeen records a node's sync: it is alive, with these readings. It
// never blocks.
func (o *Orchestrator) NodeSeen(nodeID string, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time) {
	o.news.push(nodebook.News{Node: nodeID, At: at, Readings: readings, Foreign: foreign})
}

// NodeDown records that a node went silent past its TTL. It never blocks.
func (o *Orchestrator) NodeDown(nodeID string, at time.Time) {
	o.news.push(nodebook.News{Node: nodeID, At: at, Down: true})
}

// NodeDisk records whether a node's log disk is full (full: the agent's
// words; "": it is not): a node whose disk is full takes no new jobs
// (package nodebook says how). It never blocks.
func (o *Orchestrator) NodeDisk(nodeID, full string) {
	full = nodebook.DiskNote(full)
	o.news.push(nodebook.News{Node: nodeID, Disk: &full})
}

// applyNodeEvents applies node news (nodebook.Book.Apply) and what
// follows in the loop: a node that goes down or comes back up is stored
// so, so that a restart keeps it down until its agent reports; alerts,
// log lines, a cycle due. A report never moves a node's last sight back
// in time (news queued behind a stall may arrive after newer news). Loop
// only.
func (o *Orchestrator) applyNodeEvents(ctx context.Context, evs []nodebook.News) {
	if len(evs) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applyNodeEventsLocked(ctx, evs)
}

// applyNodeEventsLocked is applyNodeEvents with the write lock held.
func (o *Orchestrator) applyNodeEventsLocked(ctx context.Context, evs []nodebook.News) {
	if len(evs) == 0 {
		return
	}
	var flipped []*Node
	for _, ev := range evs {
		n, c := o.gpus.Nodes().Apply(ev)
		switch c {
		case nodebook.WentDown:
			o.wentDown(n, ev.At) // liveness.go
			flipped = append(flipped, n)
		case nodebook.CameBack:
			o.dirty = true
			o.log.Info("node up", "node", n.ID)
			o.notes.Alert(notify.AlertNodeUp, ev.At, n.ID, nil, "node %s is back up", n.ID)
			flipped = append(flipped, n)
			fallthrough
		case nodebook.Reported: // its readings go to the alerts, the used GPU time and the idle check
			o.notes.NodeReadings(n.ID, ev.Readings, ev.Foreign, ev.At)
			if ev.Readings != nil {
				o.spend.IntegrateReadings(n.ID, ev.Readings, ev.At) // feature/spend: used GPU time
				o.checkIdle(n, ev.At)
			}
			if len(ev.Foreign) > 0 {
				o.dirty = true // GPUs used outside Corral are not handed out
			}
		case nodebook.DiskFilled:
			o.dirty = true
			o.log.Warn("node takes no new jobs: its log disk is full", "node", n.ID, "why", *ev.Disk)
			o.notes.Alert(notify.AlertDiskFull, o.cfg.Now(), n.ID, nil, "node %s's log disk is nearly full (%s): it takes no new jobs", n.ID, *ev.Disk)
		case nodebook.DiskHasRoom:
			o.dirty = true
			o.log.Info("node takes new jobs again: its log disk has room", "node", n.ID)
		case nodebook.DiskReworded:
			o.dirty = true
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
		return api.NodeAction{NodeID: nodeID, State: gpubook.State(n, o.jobs.Active())}, nil
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
