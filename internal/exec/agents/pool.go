// Package agents is the executor whose workers are Corral node agents
// (`corral agent`, and the in-process agent of `corral up`).
//
// Agents pull. The pool keeps, per node, the desired state: every task (one
// rank of one attempt of a job) the node should run, with a stop request
// and a notice where the orchestrator asked for one. An agent registers,
// then syncs: it reports what it runs and gets the desired state back,
// the call held open until there is something new (long poll). The pool
// turns the ranks' reports into one Started and one Exited per attempt for
// the orchestrator.
//
//	orchestrator ──Start/Stop/Notice──▶ pool ◀──Register/Sync── agent ──▶ shim ──▶ job
//	             ◀──────Sink──────────┘
package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// ErrUnknownNode is returned by Sync for a node that has not registered with
// this server (it restarted, or the node is new): the agent registers again.
var ErrUnknownNode = &api.Error{Status: 409, Code: "unknown_node", Message: "this node is not registered with the server; register again"}

// NodeBook is the part of the orchestrator that keeps the node registry.
type NodeBook interface {
	// RegisterNode records a node durably. addr is where the agent
	// connected from.
	RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error
	// NodeSeen records a sync: the node is alive, with these readings.
	// It must not block.
	NodeSeen(nodeID string, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time)
}

// DiskBook is a NodeBook that also learns whether a node's log disk is
// full (api.AgentReport.DiskFull; "": it is not), at every sync. It must
// not block.
type DiskBook interface {
	NodeDisk(nodeID, full string)
}

// Config is what a Pool needs.
type Config struct {
	Sink     exec.Sink
	Book     NodeBook
	Interval time.Duration // how often agents report; default 5s
	NodeTTL  time.Duration // told to agents; default 30s
	// StopGrace is how long the other ranks of a gang get when one rank
	// fails. Default 10s.
	StopGrace time.Duration
	// MaxGPUs is the most GPUs a node may register (--max-gpus-per-node).
	// Default DefaultMaxGPUs; at most MaxGPUsLimit.
	MaxGPUs int
	Now     func() time.Time
	Logger  *slog.Logger
}

// Pool is an exec.Executor, Noticer and Adopter backed by agents. Safe for
// concurrent use.
type Pool struct {
	cfg Config

	mu    sync.Mutex
	nodes map[string]*node
	gangs map[gangKey]*gang
	ended endedRanks // where the ranks of recently ended gangs ran
	// unsettled: the nodes (by rank) of ended gangs whose ranks stay in
	// their nodes' desired state until the orchestrator has committed the
	// end (Settled), so that their agents keep the tasks' records.
	unsettled map[gangKey][]string
}

type gangKey struct {
	job     string
	attempt int
}

type taskKey struct {
	job           string
	attempt, rank int
}

// node is the pool's view of one agent's node.
type node struct {
	id         string
	address    string
	registered bool          // registered with this server since it started
	agentID    string        // the agent that registered it last
	from       string        // the address it registered from
	seen       time.Time     // its last registration or sync
	memory     map[int]int64 // its GPUs' memory (MiB) by index, as registered
	warned     time.Time     // when a bad reading of it was last logged
	gen        uint64
	wake       chan struct{} // closed when gen moves
	tasks      map[taskKey]*task
}

// task is one rank the node should run.
type task struct {
	spec      api.TaskSpec
	delivered bool // sent to the node's agent (or adopted: it should have it)
	running   bool
	// ended: its agent reported its end. It stays in the desired state,
	// marked Stop (an agent that does not know it never starts it), until
	// Settled: while it is listed, its agent keeps its record, and a
	// server that dies before committing the end hears it again, with its
	// exit code, from the agent that adopts the record.
	ended bool
}

// gang is one attempt of one job over its ranks.
type gang struct {
	nodes   []string // by rank
	running map[int]bool
	ran     map[int]bool // ranks seen running, or ended after they ran
	exits   map[int]api.TaskStatus
	missing map[int]bool // ranks whose agents registered without them (lost at registration)
	started bool
	pid     int
	placed  time.Time // when the server handed it out: no rank started before
	first   int       // the rank that failed first (-1: none): its exit is the gang's
}

var (
	_ exec.Executor = (*Pool)(nil)
	_ exec.Noticer  = (*Pool)(nil)
	_ exec.Adopter  = (*Pool)(nil)
	_ exec.Settler  = (*Pool)(nil)
)

// New returns an empty pool.
func New(cfg Config) *Pool {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = 30 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.MaxGPUs <= 0 {
		cfg.MaxGPUs = DefaultMaxGPUs
	}
	cfg.MaxGPUs = min(cfg.MaxGPUs, MaxGPUsLimit)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pool{cfg: cfg, nodes: map[string]*node{}, gangs: map[gangKey]*gang{}, unsettled: map[gangKey][]string{}}
}

// nodeLocked returns the node, creating its entry. Lock held.
func (p *Pool) nodeLocked(id string) *node {
	n := p.nodes[id]
	if n == nil {
		n = &node{id: id, wake: make(chan struct{}), tasks: map[taskKey]*task{}}
		p.nodes[id] = n
	}
	return n
}

// bump tells the node's agent its desired state changed. Lock held.
func (n *node) bump() {
	n.gen++
	close(n.wake)
	n.wake = make(chan struct{})
}

// Start puts every rank of the task in its node's desired state.
func (p *Pool) Start(ctx context.Context, t exec.Task) error {
	return p.place(t, false)
}

// Adopt is Start for a task that was running when the server stopped: its
// agent should still have it, and reports it lost when it registers
// without it.
func (p *Pool) Adopt(ctx context.Context, t exec.Task) error {
	return p.place(t, true)
}

func (p *Pool) place(t exec.Task, delivered bool) error {
	ranks := t.Ranks
	if len(ranks) == 0 {
		ranks = []exec.Rank{{NodeID: t.NodeID, GPUs: t.GPUs, GPUUUIDs: t.GPUUUIDs}}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := gangKey{t.JobID, t.Attempt}
	if _, dup := p.gangs[k]; dup {
		return nil // already placed: Start is idempotent
	}
	g := &gang{running: map[int]bool{}, ran: map[int]bool{}, missing: map[int]bool{}, exits: map[int]api.TaskStatus{}, first: -1, placed: p.cfg.Now()}
	if !t.Placed.IsZero() && t.Placed.Before(g.placed) {
		g.placed = t.Placed // adopted: it may have started before this server did
	}
	master := p.nodeLocked(ranks[0].NodeID).address
	for r, rk := range ranks {
		n := p.nodeLocked(rk.NodeID)
		g.nodes = append(g.nodes, rk.NodeID)
		n.tasks[taskKey{t.JobID, t.Attempt, r}] = &task{delivered: delivered, spec: api.TaskSpec{
			JobID: t.JobID, Attempt: t.Attempt, Rank: r, NumNodes: len(ranks), MasterAddr: master,
			MasterPort: api.MasterPort(t.JobID, t.Attempt), Command: t.Command, Workdir: t.Workdir, Env: t.Env, User: t.User,
			GPUs: append([]int{}, rk.GPUs...), GPUUUIDs: rk.GPUUUIDs,
			MemMiB: t.MemMiB, CPUs: t.CPUs, Image: t.Image, Mounts: t.Mounts,
			MIGDevices: t.MIGDevices, GPUShareMiB: t.GPUShareMiB, GPUCompute: t.GPUCompute,
		}}
		jobIO(&n.tasks[taskKey{t.JobID, t.Attempt, r}].spec, t, r, rk.NodeID) // jobio.go
		n.bump()
	}
	p.gangs[k] = g
	return nil
}

// Stop asks every rank of the attempt to end: SIGTERM, SIGKILL after grace.
func (p *Pool) Stop(ctx context.Context, jobID string, attempt int, grace time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(gangKey{jobID, attempt}, grace, "")
	return nil
}

// Notice sets the text written to each rank's notice file before SIGTERM.
func (p *Pool) Notice(ctx context.Context, jobID string, attempt int, text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(gangKey{jobID, attempt}, -1, text)
	return nil
}

// stopLocked marks the gang's ranks to stop (grace >= 0) or to be warned
// (notice != ""). Lock held.
func (p *Pool) stopLocked(k gangKey, grace time.Duration, notice string) {
	g := p.gangs[k]
	if g == nil {
		return
	}
	for r, nodeID := range g.nodes {
		n := p.nodes[nodeID]
		t := n.tasks[taskKey{k.job, k.attempt, r}]
		if t == nil {
			continue
		}
		if notice != "" {
			t.spec.Notice = notice
		}
		if grace >= 0 && !t.spec.Stop {
			t.spec.Stop, t.spec.StopGrace = true, api.Seconds(grace.Seconds())
		}
		n.bump()
	}
}

// Register records a node (durably, through the NodeBook) and settles what
// its agent says it runs: a task this node should run that the agent does
// not list, although it was delivered, is lost. A registration out of
// bounds (checkRegistration: no agent id, too many GPUs, absurd memory,
// repeated indexes, ...) is refused with a 422 naming the field, and one
// for a node another agent holds with 409 node_in_use; neither changes
// anything.
func (p *Pool) Register(ctx context.Context, reg api.AgentRegistration, addr string) (api.AgentConfig, error) {
	if err := checkRegistration(reg, p.cfg.MaxGPUs); err != nil {
		return api.AgentConfig{}, err
	}
	if err := p.checkHolder(reg, addr); err != nil {
		return api.AgentConfig{}, err
	}
	if err := p.cfg.Book.RegisterNode(ctx, reg, addr); err != nil {
		return api.AgentConfig{}, err
	}
	now := p.cfg.Now()
	p.mu.Lock()
	n := p.nodeLocked(reg.NodeID)
	// Another agent takes over a node whose holder has been silent past
	// the TTL: the holder's tasks are lost, and none of them (their
	// commands, their env) is handed to the newcomer.
	handover := n.registered && n.agentID != reg.AgentID
	n.registered = true
	n.agentID, n.from, n.seen = reg.AgentID, addr, now
	n.address = reg.Address
	if n.address == "" {
		n.address = addr
	}
	n.memory = make(map[int]int64, len(reg.GPUs))
	for _, g := range reg.GPUs {
		n.memory[g.Index] = g.MemoryMiB
	}
	listed := map[taskKey]bool{}
	for _, ts := range reg.Tasks {
		listed[taskKey{ts.JobID, ts.Attempt, ts.Rank}] = true
	}
	why := "lost: the agent on " + reg.NodeID + " restarted without it"
	if handover {
		why = "lost: another agent took over " + reg.NodeID + " after its agent went silent"
	}
	var lost []api.TaskStatus
	for k, t := range n.tasks {
		if t.ended {
			continue // reported already; kept until settled
		}
		if handover || (t.delivered && !listed[k]) {
			lost = append(lost, api.TaskStatus{JobID: k.job, Attempt: k.attempt, Rank: k.rank, State: api.TaskExited,
				ExitCode: -1, Error: why})
		}
	}
	updates := p.applyLocked(n, lost, agentClock{server: now}, true)
	if !handover {
		updates = append(updates, p.applyLocked(n, reg.Tasks, agentClock{server: now, agent: reg.Now}, false)...)
	}
	n.bump()
	p.mu.Unlock()
	p.send(updates)
	p.cfg.Logger.Info("agent registered", "node", reg.NodeID, "tasks", len(reg.Tasks), "lost", len(lost))
	return api.AgentConfig{NodeID: reg.NodeID, HeartbeatInterval: api.Seconds(p.cfg.Interval.Seconds()), NodeTTL: api.Seconds(p.cfg.NodeTTL.Seconds())}, nil
}

// checkHolder refuses a registration for a node that another agent (with
// another agent id) holds and that has been seen within the node TTL: two
// agents under one node id would both run its jobs, and the newcomer would
// be handed the node's tasks. A restarted agent keeps its id (it lives in
// its data directory); one started elsewhere waits, retrying, until the
// old one has been silent for the TTL. Every registration carries an
// agent id (checkRegistration).
func (p *Pool) checkHolder(reg api.AgentRegistration, addr string) error {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[reg.NodeID]
	if n == nil || !n.registered || n.agentID == reg.AgentID {
		return nil
	}
	if idle := now.Sub(n.seen); idle < p.cfg.NodeTTL {
		return &api.Error{Status: http.StatusConflict, Code: "node_in_use", Field: "node_id", Message: fmt.Sprintf(
			"node %s is held by another agent (registered from %s, last heard %s ago); stop it, or give this agent another --node-name (or wait %s for the other to count as gone)",
			reg.NodeID, n.from, idle.Round(time.Millisecond), (p.cfg.NodeTTL - idle).Round(time.Second))}
	}
	return nil
}

// Sync applies a node's report and answers with its desired state, holding
// the call (up to report.Wait) while there is nothing newer than what the
// agent has. A task report no agent would make (badTask), a reading out
// of bounds (badReading) or a foreign process on a GPU the node did not
// register is dropped with a warning, the rest kept: a broken sensor, or
// a broken task record, must not cost the node its jobs.
func (p *Pool) Sync(ctx context.Context, rep api.AgentReport) (api.AgentWork, error) {
	tasks, dropped, first := screenTasks(rep.Tasks)
	if dropped > 0 {
		p.cfg.Logger.Warn("dropped malformed task reports from an agent", "node", rep.NodeID, "dropped", dropped, "first", first)
	}
	now := p.cfg.Now()
	p.mu.Lock()
	n := p.nodes[rep.NodeID]
	if n == nil || !n.registered {
		p.mu.Unlock()
		return api.AgentWork{}, ErrUnknownNode
	}
	n.seen = now
	updates := p.applyLocked(n, tasks, agentClock{server: now, agent: rep.Now}, false)
	readings, foreign := p.screenLocked(n, rep.Telemetry, rep.Foreign, now)
	p.mu.Unlock()
	p.cfg.Book.NodeSeen(rep.NodeID, readings, foreign, now)
	if db, ok := p.cfg.Book.(DiskBook); ok {
		db.NodeDisk(rep.NodeID, rep.DiskFull)
	}
	p.send(updates)

	wait := min(rep.Wait.Duration(), 60*time.Second)
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		p.mu.Lock()
		if rep.Generation != n.gen || timer == nil {
			work := p.workLocked(n)
			p.mu.Unlock()
			return work, nil
		}
		wake := n.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-timer:
			timer = nil
		case <-ctx.Done():
			return api.AgentWork{}, ctx.Err()
		}
	}
}

// workLocked is the node's desired state; every task in it is delivered.
// Lock held.
func (p *Pool) workLocked(n *node) api.AgentWork {
	w := api.AgentWork{Generation: n.gen, Tasks: make([]api.TaskSpec, 0, len(n.tasks))}
	for _, t := range n.tasks {
		t.delivered = true
		w.Tasks = append(w.Tasks, t.spec)
	}
	sort.Slice(w.Tasks, func(a, b int) bool {
		x, y := w.Tasks[a], w.Tasks[b]
		if x.JobID != y.JobID {
			return x.JobID < y.JobID
		}
		if x.Attempt != y.Attempt {
			return x.Attempt < y.Attempt
		}
		return x.Rank < y.Rank
	})
	return w
}

// screenLocked keeps the node's readings and foreign processes that are
// within bounds, and logs (at most once a minute per node) what it drops.
// Lock held.
func (p *Pool) screenLocked(n *node, rs []api.GPUReading, fs []api.ForeignProcess, now time.Time) ([]api.GPUReading, []api.ForeignProcess) {
	var why []string
	var readings []api.GPUReading
	if rs != nil {
		readings = make([]api.GPUReading, 0, len(rs))
	}
	seen := make(map[int]bool, len(rs))
	for _, r := range rs {
		if bad := badReading(r, n.memory, seen); bad != "" {
			why = append(why, bad)
			continue
		}
		seen[r.Index] = true
		readings = append(readings, r)
	}
	var foreign []api.ForeignProcess
	for _, f := range fs {
		if _, ok := n.memory[f.GPU]; !ok || f.PID <= 0 {
			why = append(why, fmt.Sprintf("foreign process %d on GPU %d: not a GPU the node registered, or not a pid", f.PID, f.GPU))
			continue
		}
		f.User, f.Name = clip(f.User, maxForeignUser), clip(f.Name, maxForeignName)
		foreign = append(foreign, f)
	}
	if len(why) > 0 && now.Sub(n.warned) >= time.Minute {
		n.warned = now
		p.cfg.Logger.Warn("dropped readings out of bounds from an agent", "node", n.id, "dropped", len(why), "first", why[0])
	}
	return readings, foreign
}

// applyLocked applies a node's task reports and returns the job-level
// updates they make; their times are turned into the server's by clk. A
// report about a task the node should not run is ignored: the agent stops
// such tasks itself; so is one about a task whose end is known. missing:
// the reports are the pool's own, for delivered tasks the node's agent
// registered without (it keeps no record of them to keep). Lock held.
func (p *Pool) applyLocked(n *node, reports []api.TaskStatus, clk agentClock, missing bool) []exec.Update {
	now := clk.server
	var out []exec.Update
	for _, ts := range reports {
		k := taskKey{ts.JobID, ts.Attempt, ts.Rank}
		t := n.tasks[k]
		g := p.gangs[gangKey{ts.JobID, ts.Attempt}]
		if t == nil || g == nil || t.ended {
			continue
		}
		ts = clk.task(ts, g.placed)
		switch ts.State {
		case api.TaskRunning:
			if t.running {
				continue
			}
			t.running = true
			g.running[ts.Rank] = true
			if ts.Rank == 0 {
				g.pid = ts.PID
			}
			out = g.ran1(ts, now, out)
		case api.TaskExited:
			if ts.Error == "" {
				// It ran, perhaps too briefly for any report to see it
				// running: the gang started before it ended.
				out = g.ran1(ts, now, out)
			}
			if missing {
				delete(n.tasks, k) // its agent has nothing of it to keep
				g.missing[ts.Rank] = true
			} else {
				t.ended, t.running = true, false
				t.spec.Stop = true
			}
			n.bump()
			g.exits[ts.Rank] = ts
			delete(g.running, ts.Rank)
			if g.first < 0 && failed(ts) {
				g.first = ts.Rank
			}
			if len(g.exits) < len(g.nodes) {
				if failed(ts) {
					// One rank failed: the gang cannot go on.
					p.stopLocked(gangKey{ts.JobID, ts.Attempt}, p.cfg.StopGrace, "")
				}
				continue
			}
			delete(p.gangs, gangKey{ts.JobID, ts.Attempt})
			p.ended.add(ts.JobID, ts.Attempt, g.nodes)
			if len(g.missing) < len(g.nodes) {
				p.unsettled[gangKey{ts.JobID, ts.Attempt}] = g.nodes
			}
			out = append(out, gangExit(ts.JobID, ts.Attempt, g, now))
		}
	}
	return out
}

// ran1 records that a rank ran; once every rank has, the gang has started.
func (g *gang) ran1(ts api.TaskStatus, now time.Time, out []exec.Update) []exec.Update {
	g.ran[ts.Rank] = true
	if g.started || len(g.ran) < len(g.nodes) {
		return out
	}
	g.started = true
	at := now
	if ts.StartedAt != nil {
		at = *ts.StartedAt
	}
	return append(out, exec.Update{JobID: ts.JobID, Attempt: ts.Attempt, Kind: exec.Started, At: at, PID: g.pid, ImageDigest: ts.ImageDigest})
}

func failed(ts api.TaskStatus) bool { return ts.ExitCode != 0 || ts.Error != "" || ts.Signal != "" }

// gangExit folds the ranks' exits into one: the exit of the rank that
// failed first (the others were stopped because of it), else rank 0's.
func gangExit(job string, attempt int, g *gang, now time.Time) exec.Update {
	u := exec.Update{JobID: job, Attempt: attempt, Kind: exec.Exited, At: now}
	pick := g.exits[0]
	if g.first >= 0 {
		pick = g.exits[g.first]
	}
	u.ExitCode, u.Signal = pick.ExitCode, pick.Signal
	u.OOMKilled = pick.OOMKilled
	if pick.FinishedAt != nil {
		u.At = *pick.FinishedAt
	}
	switch {
	case strings.HasPrefix(pick.Error, "lost"):
		u.Lost, u.Err = api.ReasonLost, errors.New(pick.Error)
	case pick.Error != "" && !g.started:
		u.Err = errors.New(pick.Error)
	case pick.Error != "":
		u.Lost, u.Err = api.ReasonLost, errors.New(pick.Error)
	}
	// No rank ever ran: every agent came back without its rank.
	u.Unstarted = u.Lost != "" && !g.started && len(g.ran) == 0 && len(g.missing) == len(g.nodes)
	return u
}

// Settled drops the ranks of an ended attempt from their nodes' desired
// state (exec.Settler): the orchestrator has committed its end, so their
// agents may forget their records.
func (p *Pool) Settled(jobID string, attempt int) {
	k := gangKey{jobID, attempt}
	p.mu.Lock()
	defer p.mu.Unlock()
	nodes, ok := p.unsettled[k]
	if !ok {
		return
	}
	delete(p.unsettled, k)
	for r, id := range nodes {
		n := p.nodes[id]
		if n == nil {
			continue
		}
		tk := taskKey{jobID, attempt, r}
		if t := n.tasks[tk]; t != nil && t.ended {
			delete(n.tasks, tk)
			n.bump()
		}
	}
}

// send hands updates to the orchestrator, outside the lock.
func (p *Pool) send(us []exec.Update) {
	for _, u := range us {
		p.cfg.Sink(u)
	}
}
