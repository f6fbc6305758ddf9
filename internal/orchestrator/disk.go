package orchestrator

import (
	"strings"

	"github.com/corral-sched/corral/internal/notify"
)

// A node whose agent says its log disk is full (api.AgentReport.DiskFull,
// under the agent's --min-free-disk) takes no new jobs: the scheduler's
// snapshot marks it not schedulable and carries why (sched.Node.DiskFull),
// so that a waiting job says node_disk_full in why-pending. Its running
// jobs go on. The state follows each report: it clears as soon as the
// agent reports enough free space again.

// maxDiskNote bounds what an agent may say about its disk.
const maxDiskNote = 300

// NodeDisk records whether a node's log disk is full (full: the agent's
// words; "": it is not). It never blocks.
func (o *Orchestrator) NodeDisk(nodeID, full string) {
	full = diskNote(full)
	o.reg.events.push(nodeEvent{nodeID: nodeID, disk: &full})
}

// diskNote bounds what an agent says about its disk to maxDiskNote bytes
// of valid UTF-8.
func diskNote(full string) string {
	if len(full) > maxDiskNote {
		full = full[:maxDiskNote]
	}
	return strings.ToValidUTF8(full, "")
}

// setDiskFull applies NodeDisk's news to n. Loop only, write lock held.
func (o *Orchestrator) setDiskFull(n *Node, full string) {
	if n.diskFull == full {
		return
	}
	switch {
	case full != "" && n.diskFull == "":
		o.log.Warn("node takes no new jobs: its log disk is full", "node", n.ID, "why", full)
		o.notes.Alert(notify.AlertDiskFull, o.cfg.Now(), n.ID, nil, "node %s's log disk is nearly full (%s): it takes no new jobs", n.ID, full)
	case full == "":
		o.log.Info("node takes new jobs again: its log disk has room", "node", n.ID)
	}
	n.diskFull = full
	o.dirty = true
}
