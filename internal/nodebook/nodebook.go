// Package nodebook holds the rules of the node registry that do not need
// the orchestrator's books: how a node is stored, what an agent's
// registration must be, when another agent may take a node, a node's
// telemetry samples, liveness on the server's own time (a stall of the
// server does not count against its nodes), and when a running job's GPUs
// count as idle. The nodes themselves are here too: the Node type, whose
// state only its methods change, and the Book of nodes, which the
// orchestrator holds as a shared book (the snapshot, the views and
// placement read it) and changes from its loop.
package nodebook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/jobspec"
)

// HistoryLen is how many telemetry samples a node keeps (at the default
// 5 s interval, an hour).
const HistoryLen = 720

// Sample is one telemetry reading of a node, kept for graphs.
type Sample struct {
	At       time.Time        `json:"at"`
	Readings []api.GPUReading `json:"readings"`
}

// Record is a node as the store keeps it.
type Record struct {
	ID        string            `json:"id"`
	Hostname  string            `json:"hostname"`
	Address   string            `json:"address,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	GPUs      []api.AgentGPU    `json:"gpus"`
	Simulated bool              `json:"simulated,omitempty"`
	Cordoned  bool              `json:"cordoned,omitempty"`
	Draining  bool              `json:"draining,omitempty"`
	Agent     string            `json:"agent,omitempty"` // AgentHash of the agent that registered it last
	// Down: it was down when last stored, and stays down after a restart
	// until its agent registers again.
	Down bool `json:"down,omitempty"`
	// Containment: as registered (api.AgentRegistration).
	Containment string `json:"containment,omitempty"`
}

// Encode is the record as the store's batch holds it.
func (r Record) Encode() string {
	raw, _ := json.Marshal(r)
	return string(raw)
}

// Register is the record r becomes when an agent registers its node with
// reg, connecting from addr (its address when reg gives none): what the
// agent says replaces what was stored (copied), the agent is kept by its
// hash, and the node is up. Cordoned and draining stay as they were.
func (r Record) Register(reg api.AgentRegistration, addr string) Record {
	r.Hostname, r.Labels, r.Simulated = reg.Hostname, maps.Clone(reg.Labels), reg.Simulated
	r.Address = reg.Address
	if r.Address == "" {
		r.Address = addr
	}
	r.GPUs = slices.Clone(reg.GPUs)
	r.Agent = AgentHash(reg.AgentID)
	r.Containment = reg.Containment
	r.Down = false
	return r
}

// CheckContainment checks a registration's containment ("" is allowed:
// the agent did not say).
func CheckContainment(c string) error {
	switch c {
	case "", api.ContainCgroupV2, api.ContainCgroupV1, api.ContainProcessGroup:
		return nil
	}
	return api.Invalid("containment", "%q: want one of %s, %s, %s", truncate(c, 40),
		api.ContainCgroupV2, api.ContainCgroupV1, api.ContainProcessGroup)
}

// CheckRegistration refuses a registration that is not well formed, naming
// the field: a node name that is not a name, too many GPUs or labels, a
// containment mode Corral does not know, GPU indexes out of range or
// repeated, negative memory.
func CheckRegistration(reg api.AgentRegistration) error {
	if !jobspec.UserName.MatchString(reg.NodeID) || len(reg.NodeID) > 128 {
		return api.Invalid("node_id", "%q is not a valid node name (letters, digits, '_', '.', '@', '-')", truncate(reg.NodeID, 40))
	}
	if len(reg.GPUs) > 1024 || len(reg.Labels) > 64 {
		return api.Invalid("gpus", "too many GPUs or labels")
	}
	if err := CheckContainment(reg.Containment); err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, g := range reg.GPUs {
		if g.Index < 0 || g.Index > 1023 || seen[g.Index] || g.MemoryMiB < 0 {
			return api.Invalid("gpus", "GPU index %d is out of range, repeated, or has negative memory", g.Index)
		}
		seen[g.Index] = true
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// AgentHash is how a node record keeps its agent's id: hashed, since the
// id is what lets an agent take its node back. "" for no id.
func AgentHash(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// InUse is the refusal of a registration by another agent than the one
// that holds the node, heard from idle ago, while that is under ttl:
// 409 node_in_use, naming the way out. Nil when idle is ttl or more.
func InUse(nodeID string, idle, ttl time.Duration) error {
	if idle >= ttl {
		return nil
	}
	return &api.Error{Status: http.StatusConflict, Code: "node_in_use", Field: "node_id", Message: fmt.Sprintf(
		"node %s is held by another agent, last heard %s ago; stop it, or give this agent another --node-name (or wait %s for the other to count as gone)",
		nodeID, idle.Round(time.Millisecond), (ttl - idle).Round(time.Second))}
}
