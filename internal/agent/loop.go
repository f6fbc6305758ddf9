package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
)

// Link is how an agent reaches the control plane: over HTTP for `corral
// agent`, by direct calls for the in-process agent of `corral up`.
type Link interface {
	Register(ctx context.Context, r api.AgentRegistration) (api.AgentConfig, error)
	Sync(ctx context.Context, r api.AgentReport) (api.AgentWork, error)
	ShipLog(ctx context.Context, c api.LogChunk) error
}

// ErrUnknownNode is what a Link returns (wrapped) when the server does not
// know the node: the agent registers again.
var ErrUnknownNode = errors.New("the server does not know this node")

// Agent runs the jobs the server places on its node.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	tasks *tasks
	wake  chan struct{}
	gen   uint64

	registered     chan struct{} // closed at the first registration
	registeredOnce sync.Once
	shipMu         sync.Mutex // one log shipment at a time
}

// retryMax caps the wait between an agent's tries to reach its server: a
// server back after a restart, or a new leader after a fail-over, hears
// from every agent within it, well inside the node TTL it gives them.
const retryMax = 5 * time.Second

// shipEvery is how often a remote agent ships new job output, besides
// before each report.
const shipEvery = time.Second

// maxChunk bounds one shipped log chunk.
const maxChunk = 256 << 10

// New checks the configuration and returns an agent ready to Run.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeID == "" || cfg.Link == nil || cfg.StateDir == "" || cfg.LogDir == "" {
		return nil, errors.New("agent: NodeID, Link, StateDir and LogDir are required")
	}
	if err := CheckRunAs(cfg.RunAs, cfg.RunAsFallback); err != nil {
		return nil, err
	}
	switch cfg.Containment {
	case "", "auto", contain.ProcessGroup:
	default:
		return nil, fmt.Errorf("--containment %q: want auto or %s", cfg.Containment, contain.ProcessGroup)
	}
	if cfg.DefaultMemPerGPU < 0 || cfg.DefaultCPUsPerGPU < 0 || cfg.DefaultCPUsPerGPU != cfg.DefaultCPUsPerGPU {
		return nil, errors.New("--default-mem-per-gpu and --default-cpus-per-gpu must not be negative")
	}
	if cfg.MaxPidsPerJob < 0 || cfg.MaxPidsPerJob > contain.MaxPids {
		return nil, fmt.Errorf("--max-pids-per-job %d: want 0 (no limit) up to %d", cfg.MaxPidsPerJob, contain.MaxPids)
	}
	if cfg.MaxPidsPerNode < 0 || cfg.MaxPidsPerNode > contain.MaxPids {
		return nil, fmt.Errorf("--max-pids-per-node %d: want 0 (no limit) up to %d", cfg.MaxPidsPerNode, contain.MaxPids)
	}
	if err := CheckContainerRuntime(cfg.ContainerRuntime); err != nil {
		return nil, err
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Shim) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("agent: find own binary for the shim: %w", err)
		}
		cfg.Shim = []string{self, "shim"}
	}
	je, err := newJobEnv(cfg) // jobenv.go
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), wake: make(chan struct{}, 1), registered: make(chan struct{})}
	shares, err := newMPS(cfg.MPSControl, mpsDirOf(cfg), cfg.SharedGPUs, a.log) // mps.go
	if err != nil {
		return nil, err
	}
	a.tasks = &tasks{stateDir: cfg.StateDir, logDir: cfg.LogDir, nodeID: cfg.NodeID, server: cfg.Server, detach: cfg.Detach, unfenced: cfg.Unfenced, shim: cfg.Shim, runAs: cfg.RunAs, runAsFallback: cfg.RunAsFallback, maxLogSize: cfg.MaxLogSize,
		log: a.log, changed: a.poke, byKey: map[taskKey]*task{}, mode: contain.ProcessGroup, shells: &shellSet{},
		images: &images{runtime: cfg.ContainerRuntime, stateDir: cfg.StateDir, devDir: "/dev", cdiDirs: defaultCDIDirs},
		limits: limits{memPerGPU: cfg.DefaultMemPerGPU, cpusPerGPU: cfg.DefaultCPUsPerGPU, pids: cfg.MaxPidsPerJob, nodePids: cfg.MaxPidsPerNode}, jobEnv: je,
		mps: shares}
	return a, nil
}

// poke asks for a sync now (a task started or ended).
func (a *Agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run adopts what a previous agent left, registers, then syncs until ctx
// ends. Transient errors are retried with a capped backoff.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.serveLogin(ctx); err != nil { // login.go
		return fmt.Errorf("agent: %w", err)
	}
	if err := os.MkdirAll(a.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := os.MkdirAll(a.cfg.LogDir, 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if a.cfg.Detach {
		// Shims fence their jobs on this file: it must stay fresh while
		// the agent lives, whatever the server does.
		if err := a.touchAlive(); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		go a.keepAlive(ctx)
	}
	a.setupContainment()
	scratch, err := prepareScratch(a.cfg.ScratchDir, a.cfg.NodeID, a.cfg.StateDir) // jobenv.go
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.tasks.scratch = scratch
	defer os.Remove(scratch) // when empty: no job of this agent runs on
	if n := a.tasks.adopt(ctx); n > 0 {
		a.log.Info("found tasks of a previous agent", "tasks", n)
	}
	a.tasks.sweepScratch()
	if a.cfg.ShipLogs {
		go a.shipLoop(ctx)
	}
	if td, ok := a.cfg.Link.(TunnelDialer); ok {
		go a.tunnelLoop(ctx, td) // shells and port streams (tunnel.go)
	}
	backoff := time.Second
	registered := false
	var sup supersede // refused for its node: how, and how often (supersede.go)
	for ctx.Err() == nil {
		if !registered {
			if err := a.register(ctx); err != nil {
				wait := backoff
				if apiCode(err) == "node_in_use" {
					// Another agent holds the node: take it as soon as
					// that one has been gone for the TTL.
					wait = heldRetry
					a.heldElsewhere(&sup, err)
				} else {
					backoff = min(backoff*2, retryMax)
					a.log.Warn("register with the server failed; retrying", "err", err, "in", wait)
				}
				if !sleep(ctx, wait) {
					break
				}
				continue
			}
			registered, backoff = true, time.Second
			sup.registered(time.Now())
			a.killOrphans()
		}
		work, err := a.sync(ctx)
		switch {
		case err == nil:
			backoff = time.Second
			a.reconcile(work)
		case errors.Is(err, errWoken):
		case errors.Is(err, ErrUnknownNode):
			a.log.Info("the server does not know this node; registering again")
			registered = false
		case apiCode(err) == "wrong_node":
			// Another registration of this node replaced this agent's
			// session: register again, with a new one (supersede.go).
			registered = false
			if !sleep(ctx, a.superseded(&sup, err)) {
				break
			}
		case ctx.Err() != nil:
		default:
			a.log.Warn("sync with the server failed; retrying", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				break
			}
			backoff = min(backoff*2, retryMax)
		}
	}
	a.tasks.host.close() // it exits once its jobs have ended (shimhost.go)
	if a.cfg.Detach {
		a.releaseCgroups() // an idle agent leaves nothing behind
	}
	return nil
}

// touchAlive marks the agent alive for its fenced shims.
func (a *Agent) touchAlive() error {
	return os.WriteFile(a.tasks.alivePath(), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// keepAlive touches the liveness file every second until ctx ends. On a
// graceful stop the file is left to age: the shims fence their jobs once
// it is older than the TTL, unless a new agent takes over first.
func (a *Agent) keepAlive(ctx context.Context) {
	every(ctx, time.Second, func() {
		if err := a.touchAlive(); err != nil {
			a.log.Warn("cannot mark the agent alive; its jobs will be fenced", "err", err)
		}
	})
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (a *Agent) register(ctx context.Context) error {
	id, err := a.agentID()
	if err != nil {
		return err
	}
	reg := api.AgentRegistration{NodeID: a.cfg.NodeID, AgentID: id, Hostname: a.cfg.Hostname, Address: a.cfg.Address,
		Labels: a.cfg.Labels, Tasks: a.tasks.statuses(), GPUs: []api.AgentGPU{}, DiskFull: a.diskFull(),
		Containment: a.tasks.mode}
	now := time.Now()
	reg.Now = &now // the server measures the tasks' times against it
	if a.cfg.GPUs != nil {
		devs, err := a.cfg.GPUs.Devices(ctx)
		if err != nil {
			return fmt.Errorf("list GPUs: %w", err)
		}
		minors, uuids := make(map[int]int, len(devs)), make(map[int]string, len(devs))
		var mig map[int][]api.MIGDevice
		for _, d := range devs {
			minors[d.Index], uuids[d.Index] = d.Minor, d.UUID
			if d.MIG != nil && d.MIG.Mode == api.MIGEnabled {
				if mig == nil {
					mig = map[int][]api.MIGDevice{}
				}
				mig[d.Index] = append(mig[d.Index], d.MIG.Devices...)
			}
			reg.GPUs = append(reg.GPUs, api.AgentGPU{Index: d.Index, UUID: d.UUID, Model: d.Model, MemoryMiB: d.MemoryMiB,
				NVLinkPeers: d.NVLinkPeers, Simulated: d.Simulated, MIG: d.MIG, Shared: slices.Contains(a.cfg.SharedGPUs, d.Index)})
			reg.Simulated = reg.Simulated || d.Simulated
		}
		a.tasks.mu.Lock()
		a.tasks.minors, a.tasks.uuids = minors, uuids
		a.tasks.migs = mig
		a.tasks.mu.Unlock()
	}
	cfg, err := a.cfg.Link.Register(ctx, reg)
	if err != nil {
		return err
	}
	if iv := cfg.HeartbeatInterval.Duration(); iv > 0 && iv < a.cfg.Interval {
		a.cfg.Interval = iv
	}
	a.tasks.mu.Lock()
	a.tasks.fence = cfg.NodeTTL.Duration()
	a.tasks.mu.Unlock()
	a.gen = 0
	a.log.Info("registered with the server", "gpus", len(reg.GPUs), "tasks", len(reg.Tasks))
	a.registeredOnce.Do(func() { close(a.registered) })
	return nil
}

// StopAll stops every task of this node, SIGTERM then SIGKILL after
// grace, and waits for them to end (at most grace plus 5 seconds). The
// in-process agent of `corral up` calls it on a graceful shutdown; a
// standalone agent leaves its jobs running for the next one to adopt.
func (a *Agent) StopAll(grace time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), grace+5*time.Second)
	defer cancel()
	n := a.tasks.stopAll(ctx, grace)
	a.releaseCgroups()
	return n
}

// heldRetry is how often an agent refused because another agent holds its
// node asks again.
const heldRetry = 2 * time.Second

// killOrphans kills the jobs an earlier agent of this node started and
// that this one does not track (it ran with another data directory): the
// server settled them as lost when that agent vanished, so they must not
// run on beside their retries. It runs once the server has accepted this
// agent as the node's holder, so an agent refused for a node that a live
// one holds never touches that one's jobs.
func (a *Agent) killOrphans() {
	// Before the first sync: no new job gets a GPU while a leftover of
	// an earlier attempt may still hold it.
	a.sweepCgroups()
	if !a.cfg.Detach {
		return
	}
	n, err := KillOrphans(a.log, a.cfg.NodeID, a.cfg.Server, a.tasks.has)
	if err != nil {
		a.log.Warn("could not look for orphaned jobs", "err", err)
	}
	if n > 0 {
		a.log.Warn("killed the orphaned processes of jobs no agent tracks", "processes", n)
	}
}

// agentID is this agent's identity, kept in its state directory so that
// it survives restarts: made on first use. It is what lets an agent take
// its node back, so the file is readable by the agent's account alone
// (mode 0600, corrected if it was wider).
func (a *Agent) agentID() (string, error) {
	path := filepath.Join(a.cfg.StateDir, "agent-id")
	if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("agent id: %w", err)
		}
		return string(bytes.TrimSpace(b)), nil
	}
	var raw [12]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("agent id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := writeFileAtomic(path, []byte(id)); err != nil {
		return "", fmt.Errorf("agent id: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return "", fmt.Errorf("agent id: %w", err)
	}
	return id, nil
}

// Registered is closed once the agent has first registered with the
// server.
func (a *Agent) Registered() <-chan struct{} { return a.registered }

// errWoken: a sync was cut short because something changed here.
var errWoken = errors.New("woken")

// sync reports and waits (long poll) for work; a local change cuts the wait
// short so that it is reported at once.
func (a *Agent) sync(ctx context.Context) (api.AgentWork, error) {
	rep := api.AgentReport{NodeID: a.cfg.NodeID, Generation: a.gen, Wait: api.Seconds(a.cfg.Interval.Seconds()), Tasks: a.tasks.statuses(),
		DiskFull: a.diskFull()}
	now := time.Now()
	rep.Now = &now // the server measures the tasks' times against it
	if a.cfg.ShipLogs {
		// Output goes before the news of the end it led to, so that a
		// job's log is whole on the server once the job has ended there.
		a.shipLogs(ctx)
	}
	if a.cfg.GPUs != nil {
		if bt, ok := a.cfg.GPUs.(gpu.BusyTracker); ok {
			bt.SetBusy(a.tasks.busyGPUs())
		}
		a.tasks.releaseShares(ctx) // mps.go
		if ts, err := a.cfg.GPUs.Telemetry(ctx); err == nil {
			for _, t := range ts {
				rep.Telemetry = append(rep.Telemetry, api.GPUReading{Index: t.Index, Utilization: t.Utilization, MemoryUsedMiB: t.MemoryUsedMiB, Temperature: t.Temperature, ECCErrors: t.ECCErrors})
			}
		}
		if pl, ok := a.cfg.GPUs.(gpu.ProcessLister); ok {
			if ps, err := pl.ForeignProcesses(ctx); err == nil {
				for _, p := range ps {
					if !isCorralJob(p.PID) && !a.tasks.inJobCgroup(p.PID) && !isCorralMPS(p.PID) {
						rep.Foreign = append(rep.Foreign, api.ForeignProcess{GPU: p.GPU, PID: p.PID, User: p.User, Name: p.Name})
					}
				}
			}
		}
	}
	// Drain a stale poke: this report already carries the news.
	select {
	case <-a.wake:
	default:
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	woken := make(chan struct{})
	go func() {
		select {
		case <-a.wake:
			close(woken)
			cancel()
		case <-sctx.Done():
		}
	}()
	work, err := a.cfg.Link.Sync(sctx, rep)
	select {
	case <-woken:
		if err != nil {
			return work, errWoken
		}
		a.poke() // got an answer anyway: sync again soon with the news
	default:
	}
	return work, err
}

// isCorralJob reports whether a process belongs to a Corral job (its
// environment has CORRAL_JOB_ID), so that it is not reported as foreign.
func isCorralJob(pid int) bool {
	_, ok := corralEnviron(pid)[jobIDVar]
	return ok
}

// reconcile makes the node match the desired state: start what is new,
// warn and stop what is asked to stop, stop what is no longer wanted, and
// forget ended tasks the server no longer lists.
func (a *Agent) reconcile(w api.AgentWork) {
	a.gen = w.Generation
	want := map[taskKey]api.TaskSpec{}
	for _, s := range w.Tasks {
		want[keyOf(s)] = s
	}
	for _, st := range a.tasks.statuses() {
		k := taskKey{st.JobID, st.Attempt, st.Rank}
		if _, ok := want[k]; ok {
			continue
		}
		if st.State == api.TaskExited {
			a.tasks.forget(k)
		} else {
			a.log.Warn("stopping a task the server no longer wants here", "job_id", st.JobID, "attempt", st.Attempt)
			a.tasks.stop(k, 0, "")
		}
	}
	creds := a.tasks.credentials() // each owner's account looked up once
	for k, s := range want {
		a.tasks.mu.Lock()
		_, known := a.tasks.byKey[k]
		a.tasks.mu.Unlock()
		if !known {
			if s.Stop {
				a.tasks.skip(s) // stopped before it started here
				continue
			}
			a.tasks.startWith(s, creds)
		}
		grace := time.Duration(-1)
		if s.Stop {
			grace = s.StopGrace.Duration()
		}
		if s.Stop || s.Notice != "" {
			a.tasks.stop(k, grace, s.Notice)
		}
	}
}

// shipLimit is how far into a log an agent ships: the cap and room for
// its marker lines (logcap.go); 0: no limit.
func (a *Agent) shipLimit() int64 {
	if a.cfg.MaxLogSize <= 0 {
		return 0
	}
	return a.cfg.MaxLogSize + 4<<10
}

// shipLoop ships new job output every shipEvery, so that `corral logs -f`
// of a job on a remote node lags by about that much.
func (a *Agent) shipLoop(ctx context.Context) {
	every(ctx, shipEvery, func() { a.shipLogs(ctx) })
}

// shipLogs sends the new output of every task to the server.
func (a *Agent) shipLogs(ctx context.Context) {
	a.shipMu.Lock()
	defer a.shipMu.Unlock()
	a.tasks.mu.Lock()
	type item struct {
		k    taskKey
		from int64
	}
	var items []item
	for k, tk := range a.tasks.byKey {
		items = append(items, item{k, tk.shipped})
	}
	a.tasks.mu.Unlock()
	for _, it := range items {
		off, err := a.shipFrom(ctx, it.k, it.from)
		a.tasks.mu.Lock()
		if tk := a.tasks.byKey[it.k]; tk != nil && off > tk.shipped {
			tk.shipped = off
		}
		a.tasks.mu.Unlock()
		if err != nil {
			a.log.Warn("shipping a log failed", "job_id", it.k.job, "err", err)
		}
	}
}

// shipFrom ships task k's log from byte off and returns how far it got.
func (a *Agent) shipFrom(ctx context.Context, k taskKey, off int64) (int64, error) {
	f, err := os.Open(a.tasks.logPath(k))
	if err != nil {
		return off, nil // no output yet
	}
	defer f.Close()
	buf := make([]byte, maxChunk)
	rewound := false
	for {
		limit := a.shipLimit()
		if limit > 0 && off >= limit {
			return off, nil // the log is capped: nothing past it goes out
		}
		n, err := f.ReadAt(buf, off)
		if limit > 0 && off+int64(n) > limit {
			n = int(limit - off)
		}
		if n > 0 {
			c := api.LogChunk{NodeID: a.cfg.NodeID, JobID: k.job, Attempt: k.attempt, Rank: k.rank, Offset: off, Data: buf[:n]}
			if err := a.cfg.Link.ShipLog(ctx, c); err != nil {
				if !rewound && off > 0 && logGap(err) {
					// The server holds less of this log than was shipped to
					// it: another server leads since (fail-over), or its
					// copy was lost. Ship it whole again; the server keeps
					// only the bytes it lacks.
					a.log.Info("the server lacks part of a log: shipping it again from its start", "job_id", k.job, "attempt", k.attempt, "rank", k.rank, "shipped", off)
					off, rewound = 0, true
					continue
				}
				return off, err
			}
			off += int64(n)
		}
		if err == io.EOF || n == 0 {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// logGap reports whether the server refused a log chunk because it starts
// past the end of the server's copy (409 log_gap).
func logGap(err error) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == "log_gap"
}
