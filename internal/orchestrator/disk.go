package orchestrator

import (
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/notify"
)

// A node whose agent says its log disk is full takes no new jobs
// (package nodebook says how); here is the loop's side: the news queued,
// then applied to the node.

// NodeDisk records whether a node's log disk is full (full: the agent's
// words; "": it is not). It never blocks.
func (o *Orchestrator) NodeDisk(nodeID, full string) {
	full = nodebook.DiskNote(full)
	o.news.push(nodeEvent{nodeID: nodeID, disk: &full})
}

// setDiskFull applies NodeDisk's news to n. Loop only, write lock held.
func (o *Orchestrator) setDiskFull(n *Node, full string) {
	switch n.SetDiskFull(full) {
	case nodebook.DiskSame:
		return
	case nodebook.DiskFull:
		o.log.Warn("node takes no new jobs: its log disk is full", "node", n.ID, "why", full)
		o.notes.Alert(notify.AlertDiskFull, o.cfg.Now(), n.ID, nil, "node %s's log disk is nearly full (%s): it takes no new jobs", n.ID, full)
	case nodebook.DiskRoom:
		o.log.Info("node takes new jobs again: its log disk has room", "node", n.ID)
	}
	o.dirty = true
}
