package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// agentAuth checks the join token agents present as a bearer token.
func (s *Server) agentAuth(r *http.Request) error {
	if s.agents == nil || s.join == "" {
		return &api.Error{Status: http.StatusForbidden, Code: "agents_disabled", Message: "this server takes no agents"}
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.join)) != 1 {
		return &api.Error{Status: http.StatusUnauthorized, Code: "bad_join_token",
			Message: "agents must present the server's join token (CORRAL_JOIN_TOKEN) as a bearer token"}
	}
	s.authenticated(r)
	return nil
}

func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	var reg api.AgentRegistration
	if err := decode(r, &reg); err != nil {
		return err
	}
	if err := checkRegistration(reg); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	setTarget(r, reg.NodeID)
	if err := s.sessions.fresh(reg); err != nil {
		return err // a replay: it must not end the holder's session, nor lose its tasks
	}
	cfg, err := s.agents.Register(r.Context(), reg, host)
	if err != nil {
		return err
	}
	if cfg.Session, err = s.sessions.start(reg.NodeID); err != nil {
		return err
	}
	s.sessions.mark(reg)
	return writeJSON(w, http.StatusOK, cfg)
}

func (s *Server) agentSync(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	var rep api.AgentReport
	if err := decode(r, &rep); err != nil {
		return err
	}
	if err := checkReport(rep); err != nil {
		return err
	}
	if err := s.sessions.check(rep.NodeID, r.Header.Get(api.AgentSessionHeader)); err != nil {
		return err
	}
	work, err := s.agents.Sync(r.Context(), rep)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, work)
}

func (s *Server) agentLogs(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	var c api.LogChunk
	if err := decode(r, &c); err != nil {
		return err
	}
	if err := s.sessions.check(c.NodeID, r.Header.Get(api.AgentSessionHeader)); err != nil {
		return err
	}
	write := s.o.WriteLog
	if rp, ok := s.agents.(rankPlacer); ok {
		if !rp.RanOn(c.NodeID, c.JobID, c.Attempt, c.Rank) {
			return api.NotFound("node %s runs no rank %d of attempt %d of job %q", clipID(c.NodeID), c.Rank, c.Attempt, clipID(c.JobID))
		}
		// The pool placed this rank on this node: that holds for a job of
		// no GPUs too, whose allocation names no node.
		write = s.o.WritePlacedLog
	}
	if err := write(c); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rankPlacer is an Agents that knows where it placed each rank
// (agents.Pool): log shipments are then taken only from the rank's node.
type rankPlacer interface {
	RanOn(nodeID, jobID string, attempt, rank int) bool
}

func (s *Server) nodeAction(w http.ResponseWriter, r *http.Request) error {
	a, err := s.o.SetNodeState(r.Context(), r.PathValue("node_id"), r.PathValue("action"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

func (s *Server) nodeHistory(w http.ResponseWriter, r *http.Request) error {
	since := time.Now().Add(-time.Hour)
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := parseSince(v, time.Now())
		if err != nil {
			return api.Invalid("since", "%s", err.Error())
		}
		since = t
	}
	h, err := s.o.History(r.PathValue("node_id"), since)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"node_id": r.PathValue("node_id"), "samples": h})
}

// agentSessions binds each node id to the agent session that registered
// it last: a sync or log shipment for a node must carry that session, so
// an agent (which holds the shared join token) may report only for the
// node it registered. Sessions live in memory: after a server restart,
// agents register again (the pool forgets them too).
type agentSessions struct {
	mu     sync.Mutex
	byNode map[string]string // node id -> hex SHA-256 of the session
	// regs is, per node id, the registration that started its session
	// (fresh): made on first use.
	regs map[string]regMark
}

// regMark is what the server keeps of the registration that started a
// node's session: its agent id (hashed) and the agent's clock (its now).
type regMark struct {
	agent string
	now   time.Time
}

// fresh refuses (409 stale_registration, naming now) a registration of a
// node by the agent that holds its session when it is not newer, by that
// agent's own clock, than the registration that started the session: a
// replay of an earlier registration (its body carries the agent id) would
// otherwise end the holder's session and lose the tasks it does not list.
// The holder itself registers again with its current time, and gets a new
// session (an agent whose clock went back waits until it passes the
// earlier registration's time, or for a server restart). A registration
// with the agent id and a newer time is the agent's (or a copy of its
// data directory): it is taken (see internal/agent/supersede.go).
func (a *agentSessions) fresh(reg api.AgentRegistration) error {
	a.mu.Lock()
	m, ok := a.regs[reg.NodeID]
	a.mu.Unlock()
	if !ok || m.now.IsZero() || m.agent != hashHex(reg.AgentID) || reg.Now != nil && reg.Now.After(m.now) {
		return nil
	}
	return &api.Error{Status: http.StatusConflict, Code: "stale_registration", Field: "now", Message: fmt.Sprintf(
		"this registration of node %s is not newer, by its agent's clock, than the one that holds the node's session (%s): a replay, or the agent's clock went back; nothing was changed",
		clipID(reg.NodeID), m.now.UTC().Format(time.RFC3339Nano))}
}

// mark keeps what fresh needs of a registration that started a session.
func (a *agentSessions) mark(reg api.AgentRegistration) {
	m := regMark{agent: hashHex(reg.AgentID)}
	if reg.Now != nil {
		m.now = *reg.Now
	}
	a.mu.Lock()
	if a.regs == nil {
		a.regs = map[string]regMark{}
	}
	a.regs[reg.NodeID] = m
	a.mu.Unlock()
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (a *agentSessions) start(nodeID string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("agent session: %w", err)
	}
	secret := hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(secret))
	a.mu.Lock()
	a.byNode[nodeID] = hex.EncodeToString(sum[:])
	a.mu.Unlock()
	return secret, nil
}

func (a *agentSessions) check(nodeID, secret string) error {
	sum := sha256.Sum256([]byte(secret))
	a.mu.Lock()
	want, ok := a.byNode[nodeID]
	a.mu.Unlock()
	switch {
	case !ok:
		return &api.Error{Status: http.StatusConflict, Code: "unknown_node", Message: "node " + clipID(nodeID) + " is not registered with this server; register again"}
	case subtle.ConstantTimeCompare([]byte(want), []byte(hex.EncodeToString(sum[:]))) != 1:
		// The node's own agent registers again (with its agent id) and
		// gets a new session: a replay of its registration cannot keep
		// it out, and another agent that took the node over refuses it
		// (409 node_in_use) while it holds the node.
		return api.Forbidden("wrong_node", "this agent session did not register node "+clipID(nodeID)+", or another registration of the node has replaced it since: an agent may report only for its own node; the node's own agent registers again for a new session")
	}
	return nil
}

func clipID(s string) string { return truncate(s, 64) }

// Limits on what an agent may send. These bound sizes only: the pool
// refuses a node with more GPUs than --max-gpus-per-node (at most 1024,
// the GPU indexes 0..1023) and checks the numbers (agents.checkRegistration).
const (
	maxAgentGPUs    = 1024
	maxAgentTasks   = 4096
	maxAgentLabels  = 64
	maxAgentForeign = 4096
	maxAgentString  = 256
)

// checkRegistration bounds a registration's sizes and names.
func checkRegistration(reg api.AgentRegistration) error {
	switch {
	case strings.TrimSpace(reg.NodeID) == "" || len(reg.NodeID) > 128 || strings.ContainsAny(reg.NodeID, "/\x00"):
		return api.Invalid("node_id", "must be 1 to 128 characters without '/' or NUL")
	case len(reg.Hostname) > maxAgentString || len(reg.Address) > maxAgentString || len(reg.Version) > maxAgentString:
		return api.Invalid("hostname", "hostname, address and version are at most %d characters", maxAgentString)
	case len(reg.GPUs) > maxAgentGPUs:
		return api.Invalid("gpus", "at most %d GPUs per node", maxAgentGPUs)
	case len(reg.Tasks) > maxAgentTasks:
		return api.Invalid("tasks", "at most %d tasks per node", maxAgentTasks)
	case len(reg.Labels) > maxAgentLabels:
		return api.Invalid("labels", "at most %d labels per node", maxAgentLabels)
	}
	for k, v := range reg.Labels {
		if len(k) > 128 || len(v) > maxAgentString {
			return api.Invalid("labels", "a label is at most 128 characters = %d characters", maxAgentString)
		}
	}
	for i, g := range reg.GPUs {
		if len(g.UUID) > maxAgentString || len(g.Model) > maxAgentString || len(g.NVLinkPeers) > maxAgentGPUs {
			return api.Invalid("gpus", "a GPU's uuid and model are at most %d characters", maxAgentString)
		}
		if err := checkMIG(fmt.Sprintf("gpus[%d].mig", i), g.MIG); err != nil {
			return err
		}
	}
	return checkRegistrationText(reg) // agenttext.go
}

// maxMIGDevices bounds a GPU's MIG devices (an H100 makes at most 7).
const maxMIGDevices = 64

// checkMIG checks a registered GPU's MIG state: a known mode, at most
// maxMIGDevices devices, bounded texts.
func checkMIG(field string, m *api.MIG) error {
	if m == nil {
		return nil
	}
	known := func(mode string) bool { return mode == api.MIGEnabled || mode == api.MIGDisabled }
	if !known(m.Mode) || m.PendingMode != "" && !known(m.PendingMode) {
		return api.Invalid(field, "mode %q (pending %q) is not %q or %q", m.Mode, m.PendingMode, api.MIGEnabled, api.MIGDisabled)
	}
	if len(m.Devices) > maxMIGDevices {
		return api.Invalid(field, "at most %d MIG devices per GPU", maxMIGDevices)
	}
	for _, d := range m.Devices {
		if len(d.UUID) > maxAgentString || len(d.Profile) > maxAgentString || d.MemoryTotal < 0 {
			return api.Invalid(field, "a MIG device's uuid and profile are at most %d characters, its memory not negative", maxAgentString)
		}
	}
	return nil
}

// checkReport bounds a sync's sizes.
func checkReport(rep api.AgentReport) error {
	switch {
	case len(rep.Telemetry) > maxAgentGPUs:
		return api.Invalid("telemetry", "at most %d readings", maxAgentGPUs)
	case len(rep.Tasks) > maxAgentTasks:
		return api.Invalid("tasks", "at most %d tasks", maxAgentTasks)
	case len(rep.Foreign) > maxAgentForeign:
		return api.Invalid("foreign", "at most %d foreign processes", maxAgentForeign)
	case rep.Wait.Duration() < 0 || rep.Wait.Duration() > 10*time.Minute:
		return api.Invalid("wait", "must be between 0 and 10m")
	}
	return nil
}
