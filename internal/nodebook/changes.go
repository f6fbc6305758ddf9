package nodebook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/sched"
)

// What the loop's events change of the Book: an agent's registration, a
// node's report or its silence, an admin's action, a restart's nodes
// that hold adopted jobs. Each method changes the Book only and says
// what changed; the orchestrator stores the nodes that changed, raises
// the alerts, and settles the jobs of a node that is lost.

// Joined is what a registration made of its node.
type Joined int

const (
	Again Joined = iota // registered again while up (a restarted agent)
	New                 // a node the Book did not know
	Back                // a node that was down is back
)

// Register applies an agent's registration (checked by CheckRegistration)
// from addr at now. While the node is up, held by another agent and heard
// from within ttl of the server's attention, it is refused with 409
// node_in_use (InUse) and nothing changes. Otherwise the node is added,
// or registered again (Node.Reregistered: it is up, seen at now).
func (b *Book) Register(reg api.AgentRegistration, addr string, now time.Time, ttl time.Duration) (*Node, Joined, error) {
	n := b.Get(reg.NodeID)
	if n != nil && n.HeldByOther(reg.AgentID) {
		if err := InUse(reg.NodeID, now.Sub(n.SilentSince()), ttl); err != nil {
			return nil, Again, err
		}
	}
	joined := Again
	switch {
	case n == nil:
		n, joined = b.Add(Node{ID: reg.NodeID}), New
	case n.IsDown():
		joined = Back
	}
	*n = n.Reregistered(reg, addr, now)
	return n, joined, nil
}

// Silent applies news that node id went silent past its TTL: an up node
// is marked down (flipped). n is nil when the Book has no such node.
func (b *Book) Silent(id string) (n *Node, flipped bool) {
	n = b.Get(id)
	if n == nil || n.IsDown() {
		return n, false
	}
	n.MarkDown()
	return n, true
}

// Report applies a sync of node id at at (Node.Seen: its last sight
// never moves back in time); a node that was down is up again (back),
// its silence counted from this report. n is nil when the Book has no
// such node.
func (b *Book) Report(id string, at time.Time, readings []api.GPUReading, foreign []api.ForeignProcess) (n *Node, back bool) {
	n = b.Get(id)
	if n == nil {
		return nil, false
	}
	if n.IsDown() {
		n.MarkUp(time.Time{})
		back = true
	}
	n.Seen(at, readings, foreign)
	return n, back
}

// MarkLost marks down the nodes, up and not given in Config, silent at
// now for more than ttl (Lost), and returns them.
func (b *Book) MarkLost(now time.Time, ttl time.Duration) []*Node {
	lost := b.Lost(now, ttl)
	for _, n := range lost {
		n.MarkDown()
	}
	return lost
}

// Act applies an admin's cordon, drain or uncordon (package-level Act) to
// node id: a 404 naming the node when there is none, or the action when
// it is not one of the three; nothing changes then.
func (b *Book) Act(id, action string) (*Node, error) {
	n := b.Get(id)
	if n == nil {
		return nil, api.NotFound("no node %q", id)
	}
	if err := n.Act(action); err != nil {
		return nil, err
	}
	return n, nil
}

// Samples is node id's telemetry since a time, oldest first; a 404
// naming the node when there is none.
func (b *Book) Samples(id string, since time.Time) ([]Sample, error) {
	n := b.Get(id)
	if n == nil {
		return nil, api.NotFound("no node %q", id)
	}
	return n.Samples(since), nil
}

// Revive brings up, with a fresh TTL from now, each node that is down
// but holds one of jobs (Placed): stored down by a server that did not
// settle the jobs, whose agent may still run them, and which would wait
// for ever since a node that is down is never checked. It returns the
// nodes it brought up.
func (b *Book) Revive(jobs []*api.Job, now time.Time) []*Node {
	busy := map[string]bool{}
	for _, j := range jobs {
		for _, a := range j.Allocation {
			busy[a.NodeID] = true
		}
		if j.NodeID != "" {
			busy[j.NodeID] = true // a job of no GPUs
		}
	}
	var up []*Node
	for _, n := range b.All() {
		if n.IsDown() && busy[n.ID] {
			n.MarkUp(now)
			up = append(up, n)
		}
	}
	return up
}

// Placed reports whether the job's attempt was placed on node id: one of
// its GPUs is there, or it is its node (a job of no GPUs has no GPUs to
// say so, api.Job.NodeID).
func Placed(j *api.Job, id string) bool {
	if j.NodeID == id {
		return true
	}
	for _, a := range j.Allocation {
		if a.NodeID == id {
			return true
		}
	}
	return false
}

// PlacedNode is the node a job placed on ps runs on: rank 0's. A job of
// no GPUs (always on one node) has no allocation to name it, so the job
// records it (api.Job.NodeID), for a restarted server to adopt it there
// and for a node's loss to settle it.
func PlacedNode(ps []sched.Placement) string {
	if len(ps) == 0 {
		return ""
	}
	return ps[0].NodeID
}

// Only is the cluster's one node, "" where there are several (or none):
// where a job of no GPUs runs that was stored without its node by a
// version that did not record it (`corral up`'s own machine).
func (b *Book) Only() string {
	if len(b.nodes) != 1 {
		return ""
	}
	return b.nodes[0].ID
}

// Load adds the nodes stored before a restart (records by id, as
// Record.Encode wrote them), but for those already in the Book (given in
// Config). A node that was up has a TTL from now to report again; one
// that was down stays down until its agent registers. A record that does
// not decode is an error naming the node, and the nodes before it are
// kept.
func (b *Book) Load(records map[string]string, now time.Time) error {
	for id, raw := range records {
		if b.Has(id) {
			continue // given in Config
		}
		var rec Record
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return fmt.Errorf("node %s: %w", id, err)
		}
		n := FromRecord(rec)
		if !n.IsDown() {
			n.GraceFrom(now)
		}
		b.Add(n)
	}
	return nil
}

// Device is GPU index of node id, with its node; nil, nil when either is
// unknown.
func (b *Book) Device(id string, index int) (*Node, *gpuinfo.Device) {
	n := b.Get(id)
	if n == nil {
		return nil, nil
	}
	for k := range n.Devices {
		if n.Devices[k].Index == index {
			return n, &n.Devices[k]
		}
	}
	return nil, nil
}
