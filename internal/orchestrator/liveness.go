package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/gpubook"
	"github.com/corral-sched/corral/internal/notify"
)

// Liveness is judged on the server's own running time (package nodebook
// says how): the loop's looks at Config.Clock (o.gpus' nodes) forgive a stall of
// the server to every node that is up, through its grace.

// attend is the loop's look at its own clock: a stall since its last look
// is forgiven to every node that is up, by moving the start of its
// silence forward by the stall. Loop only, write lock held.
func (o *Orchestrator) attend() {
	stall, nodes := o.gpus.Nodes().Attend(o.cfg.Clock(), o.cfg.Tick)
	if stall == 0 {
		return
	}
	o.log.Warn("the server stalled (its process stopped, its machine slept, or its store or lock held it); the stall does not count against its nodes' --node-ttl",
		"stalled_for", stall.Round(time.Millisecond), "nodes", nodes, "node_ttl", o.cfg.NodeTTL)
}

// checkNodes marks nodes down that have been silent past the TTL of the
// server's attention and settles their jobs in the same commit as their
// down state: requeued with backoff while retries remain, else failed
// with reason node_lost; their GPUs are freed in the books and the
// executor is told to stop what may be left of them. Reports waiting for
// the loop are applied first, under the same lock. Loop only.
func (o *Orchestrator) checkNodes(ctx context.Context) {
	o.mu.Lock()
	// Reports that came in while the loop waited (for the lock, for the
	// store) count before any node is judged.
	o.applyNodeEventsLocked(ctx, o.news.take())
	now := o.cfg.Now() // before attend reads Clock: a stall seen by one is seen by the other
	o.attend()
	lost := o.gpus.Nodes().MarkLost(now, o.cfg.NodeTTL)
	if len(lost) == 0 {
		o.mu.Unlock()
		return
	}
	tx := o.begin()
	var us []exec.Update
	for _, n := range lost {
		o.wentDown(n, now)
		tx.persistNode(n)
		for j := range gpubook.On(n.ID, o.jobs.Active()) { // their attempts end, lost with the node
			us = append(us, exec.Update{JobID: j.ID, Attempt: j.RetryCount, Kind: exec.Exited, At: now, ExitCode: -1,
				Lost: api.ReasonNodeLost, Err: fmt.Errorf("node %s stopped reporting for %s", n.ID, o.cfg.NodeTTL)})
		}
	}
	o.applyUpdatesTx(tx, us)
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("lost nodes not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// wentDown is what follows a node's going down in the loop (the Book
// marked it): a cycle, a log line and an alert. Write lock held.
func (o *Orchestrator) wentDown(n *Node, at time.Time) {
	o.dirty = true
	since := n.SilentSince() // its last report, or the server's start if it has not reported since
	o.log.Warn("node down", "node", n.ID, "last_seen", n.LastSeen(), "silent_since", since)
	o.notes.Alert(notify.AlertNodeDown, at, n.ID, nil, "node %s is down: silent since %s", n.ID, since.UTC().Format(time.RFC3339))
}
