// Package ray runs Corral's jobs on a Ray cluster through the Ray Jobs API
// of its head (the dashboard's HTTP server, port 8265): each attempt is one
// Ray job whose submission_id is the attempt's id, pinned to the node
// Corral's core chose with entrypoint_resources {"node:IP": 0.001}. The
// cluster's alive nodes and their GPUs are registered with the
// orchestrator as pool "ray" (nodes.go); state and logs are polled.
//
// Corral's record is the truth: a job the head no longer knows (a head
// restart) is reported lost; a head that cannot be reached opens a circuit
// breaker, its nodes are marked down (nothing new is placed there; what
// runs keeps its state), and the executor probes with backoff until the
// head answers again.
package ray

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
)

// PoolName is the pool label the executor gives its nodes by default.
const PoolName = "ray"

// NodeBook is the part of the orchestrator that keeps the node registry.
type NodeBook interface {
	// RegisterNode records a node durably.
	RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error
	// NodeSeen records that the node is alive. It must not block.
	NodeSeen(nodeID string, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time)
	// NodeDown marks the node down at once (nothing new is placed there;
	// its jobs keep their state). It must not block.
	NodeDown(nodeID string, at time.Time)
}

// Config is what an Executor needs. Address and Sink are required.
type Config struct {
	// Address is the Ray dashboard's URL, e.g. http://head:8265.
	Address string
	// Token is Ray's auth token (RAY_AUTH_TOKEN), sent as
	// "Authorization: Bearer"; empty: none.
	Token string
	Sink  exec.Sink
	// Book learns the cluster's nodes; nil: nobody (tests that drive the
	// executor alone).
	Book NodeBook
	// Pool is the value of the "pool" label of the cluster's nodes;
	// default "ray".
	Pool string
	// Poll is how often nodes and jobs are polled; default 1s.
	Poll time.Duration
	// StopWait is RAY_JOB_STOP_WAIT_TIME_S of every job: how long Ray
	// waits between SIGTERM and SIGKILL when a job is stopped. Default 10s.
	StopWait time.Duration
	// Breaker sets the circuit breaker (failures in a row before it opens,
	// first reset timeout, cap of its backoff).
	Breaker breaker.Config
	// HTTP is the client; default one with a 10s timeout.
	HTTP   *http.Client
	Logger *slog.Logger
	Now    func() time.Time // default time.Now
}

// Health is what GET /orchestrator/status shows of an executor.
type Health = exec.Health

// key names an attempt.
type key struct {
	job     string
	attempt int
}

// attempt is one Ray job the executor follows.
type attempt struct {
	task       exec.Task
	req        SubmitRequest
	submitted  bool // Ray has it (or had it: adopted)
	started    bool // Started was sent
	stopWanted bool // a stop is to be sent to Ray
	busy       bool // a poll of it is under way (one at a time)
	logOff     int64
}

// Executor runs tasks as Ray jobs. It is safe for concurrent use; Run
// must be running for nodes and job states to be followed.
type Executor struct {
	cfg Config
	c   client
	br  *breaker.Breaker
	log *slog.Logger

	mu       sync.Mutex
	tasks    map[key]*attempt
	nodes    map[string]NodeState // Corral node id -> Ray node, alive at the last poll
	known    map[string]string    // Corral node id -> what was registered (to register again on change)
	downSent bool                 // the nodes were marked down since the breaker opened
	polled   bool                 // the node list was read at least once
}

// New returns an executor for the Ray head at cfg.Address.
func New(cfg Config) (*Executor, error) {
	if cfg.Address == "" || cfg.Sink == nil {
		return nil, errors.New("ray: Address and Sink are required")
	}
	if cfg.Book == nil {
		cfg.Book = noBook{}
	}
	if !strings.HasPrefix(cfg.Address, "http://") && !strings.HasPrefix(cfg.Address, "https://") {
		return nil, fmt.Errorf("ray: address %q: want http://host:port or https://host:port (the dashboard, port 8265 by default)", cfg.Address)
	}
	if cfg.Pool == "" {
		cfg.Pool = PoolName
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = 10 * time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Executor{cfg: cfg, c: client{base: strings.TrimRight(cfg.Address, "/"), token: cfg.Token, http: cfg.HTTP},
		br: breaker.New(cfg.Breaker), log: cfg.Logger.With("executor", "ray"),
		tasks: map[key]*attempt{}, nodes: map[string]NodeState{}, known: map[string]string{}}, nil
}

// noBook is the NodeBook of an executor nobody follows the nodes of.
type noBook struct{}

func (noBook) RegisterNode(context.Context, api.AgentRegistration, string) error  { return nil }
func (noBook) NodeSeen(string, []api.GPUReading, []api.ForeignProcess, time.Time) {}
func (noBook) NodeDown(string, time.Time)                                         {}

// SubmissionID is the Ray submission_id of a job's attempt.
func SubmissionID(jobID string, attempt int) string {
	return fmt.Sprintf("corral-%s-%d", jobID, attempt)
}

// call runs f through the breaker: refused at once while it is open;
// an unreachable cluster counts as a failure, any answer as a success.
func (e *Executor) call(f func() error) error {
	if err := e.br.Allow(e.cfg.Now()); err != nil {
		return err
	}
	err := f()
	if Unreachable(err) {
		e.br.Failure(e.cfg.Now(), err)
	} else {
		e.br.Success(e.cfg.Now())
	}
	return err
}

// Start submits the attempt to Ray in the background and returns: it is
// called from the orchestrator's loop, which must not wait on the network.
// The submission goes at once, and again at each poll until the head takes
// it (the submission_id makes a retry idempotent): a cluster that cannot be
// reached is no failure. A submission Ray refuses ends the attempt (an
// Exited update with Err). Multi-node gangs, and a node the cluster does
// not have, are refused here: a Ray job's entrypoint runs on one node.
func (e *Executor) Start(ctx context.Context, t exec.Task) error {
	if len(t.Ranks) > 1 {
		return fmt.Errorf("ray: a job on %d nodes cannot run as one Ray job (its entrypoint runs on one node); ask for one node", len(t.Ranks))
	}
	e.mu.Lock()
	n, ok := e.nodes[t.NodeID]
	polled := e.polled
	e.mu.Unlock()
	if !ok {
		// Not alive at the last poll. Before any poll (a test driving the
		// executor alone), or while the head is away, the node's IP is
		// read from its Corral name.
		ip, named := nodeIP(t.NodeID)
		if !named || (polled && e.br.Snapshot().State == breaker.Closed) {
			return fmt.Errorf("ray: node %s is not an alive node of the Ray cluster at %s", t.NodeID, e.cfg.Address)
		}
		n = NodeState{NodeIP: ip}
	}
	a := &attempt{task: t, req: e.request(t, n)}
	k := key{t.JobID, t.Attempt}
	e.mu.Lock()
	e.tasks[k] = a
	e.mu.Unlock()
	go e.pollOne(context.WithoutCancel(ctx), k)
	return nil
}

// request is the Jobs API submission of t on Ray node n.
func (e *Executor) request(t exec.Task, n NodeState) SubmitRequest {
	env := maps.Clone(t.Env)
	if env == nil {
		env = map[string]string{}
	}
	rank0 := strconv.Itoa(0)
	for k, v := range map[string]string{
		"CORRAL_JOB_ID": t.JobID, "CORRAL_ATTEMPT": strconv.Itoa(t.Attempt), "CORRAL_NODE_ID": t.NodeID,
		"CORRAL_NUM_GPUS": strconv.Itoa(len(t.GPUs)), "CORRAL_NODE_RANK": rank0, "CORRAL_NUM_NODES": "1",
		"CORRAL_MASTER_ADDR": n.NodeIP, "RAY_JOB_STOP_WAIT_TIME_S": strconv.Itoa(int((e.cfg.StopWait + time.Second - 1) / time.Second)),
	} {
		env[k] = v
	}
	entry := t.Command
	if t.Workdir != "" {
		entry = "cd " + shellQuote(t.Workdir) + " || exit 1\n" + t.Command
	}
	gpus := float64(len(t.GPUs))
	r := SubmitRequest{Entrypoint: entry, SubmissionID: SubmissionID(t.JobID, t.Attempt),
		RuntimeEnv:          &RuntimeEnv{EnvVars: env},
		Metadata:            map[string]string{"corral_job_id": t.JobID, "corral_attempt": strconv.Itoa(t.Attempt)},
		EntrypointNumGPUs:   &gpus,
		EntrypointResources: map[string]float64{"node:" + n.NodeIP: 0.001}}
	if t.CPUs > 0 {
		c := t.CPUs
		r.EntrypointNumCPUs = &c
	}
	if t.MemMiB > 0 {
		m := t.MemMiB << 20
		r.EntrypointMemory = &m
	}
	return r
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Adopt follows an attempt that was submitted before the server restarted:
// the next poll finds it running, ended, or unknown to Ray (lost).
func (e *Executor) Adopt(ctx context.Context, t exec.Task) error {
	a := &attempt{task: t, submitted: true}
	a.req.SubmissionID = SubmissionID(t.JobID, t.Attempt)
	if fi, err := os.Stat(t.LogPath); err == nil {
		a.logOff = fi.Size() // what earlier polls copied
	}
	e.mu.Lock()
	e.tasks[key{t.JobID, t.Attempt}] = a
	e.mu.Unlock()
	return nil
}

// Stop asks Ray to stop the attempt, in the background: Ray sends
// SIGTERM, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S (Config.StopWait,
// set at submission; grace cannot change it afterwards). Unreachable, the
// stop is sent once the head answers. An attempt not yet submitted ends at
// once.
func (e *Executor) Stop(ctx context.Context, jobID string, att int, grace time.Duration) error {
	k := key{jobID, att}
	e.mu.Lock()
	a, ok := e.tasks[k]
	never := ok && !a.submitted && !a.busy
	if never {
		delete(e.tasks, k)
	} else if ok {
		a.stopWanted = true
	}
	e.mu.Unlock()
	switch {
	case never:
		e.cfg.Sink(exec.Update{JobID: jobID, Attempt: att, Kind: exec.Exited, At: e.cfg.Now(), ExitCode: 128 + 15, Signal: "terminated"})
	case ok:
		go e.pollOne(context.WithoutCancel(ctx), k)
	}
	return nil
}

// sendStop posts the stop; it stays wanted while the head cannot be asked.
func (e *Executor) sendStop(ctx context.Context, k key, a *attempt) {
	err := e.call(func() error { return e.c.stop(ctx, a.req.SubmissionID) })
	if err != nil && !errors.Is(err, ErrNotFound) && (errors.Is(err, breaker.ErrOpen) || Unreachable(err)) {
		e.log.Warn("stop not sent; retried when the Ray head answers", "job_id", k.job, "err", err)
		return
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		e.log.Warn("stop refused by Ray", "job_id", k.job, "err", err)
	}
	e.mu.Lock()
	a.stopWanted = false
	e.mu.Unlock()
}

// Run polls the cluster's nodes and the followed jobs until ctx ends.
func (e *Executor) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		e.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll does one round: nodes, then each followed attempt. Run calls it;
// tests may call it directly.
func (e *Executor) Poll(ctx context.Context) {
	e.syncNodes(ctx)
	e.mu.Lock()
	keys := make([]key, 0, len(e.tasks))
	for k := range e.tasks {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		e.pollOne(ctx, k)
	}
}

// pollOne brings one attempt forward: submits it, sends its stop, or
// reads its state and logs and reports what changed.
func (e *Executor) pollOne(ctx context.Context, k key) {
	e.mu.Lock()
	a, ok := e.tasks[k]
	var submitted, stop bool
	if ok {
		if a.busy { // another poll of it is under way
			e.mu.Unlock()
			return
		}
		a.busy = true
		submitted, stop = a.submitted, a.stopWanted
	}
	e.mu.Unlock()
	if !ok {
		return
	}
	defer func() {
		e.mu.Lock()
		a.busy = false
		e.mu.Unlock()
	}()
	if !submitted {
		if err := e.call(func() error { return e.c.submit(ctx, a.req) }); err != nil {
			if !errors.Is(err, breaker.ErrOpen) && !Unreachable(err) {
				e.finish(k, exec.Update{ExitCode: -1, Err: fmt.Errorf("ray: submit %s: %w", a.req.SubmissionID, err)})
			} else {
				e.log.Warn("Ray head unreachable; the job is submitted once it answers", "job_id", k.job, "err", err)
			}
			return
		}
		e.mu.Lock()
		a.submitted = true
		e.mu.Unlock()
		e.log.Info("submitted", "job_id", k.job, "submission_id", a.req.SubmissionID, "node", a.task.NodeID)
	}
	if stop {
		e.sendStop(ctx, k, a)
	}
	var d JobDetails
	err := e.call(func() (err error) { d, err = e.c.job(ctx, a.req.SubmissionID); return err })
	switch {
	case errors.Is(err, ErrNotFound):
		e.finish(k, exec.Update{ExitCode: -1, Lost: api.ReasonLost,
			Err: fmt.Errorf("the Ray cluster at %s no longer knows job %s (its head restarted?)", e.cfg.Address, a.req.SubmissionID)})
		return
	case err != nil:
		return // unreachable: the breaker counts it; the attempt keeps its state
	}
	switch d.Status {
	case StatusPending:
		return
	case StatusRunning:
		e.copyLogs(ctx, a)
		e.markStarted(k, a, d)
		return
	case StatusSucceeded, StatusFailed, StatusStopped:
		e.copyLogs(ctx, a)
		e.markStarted(k, a, d)
		e.finish(k, exitOf(d))
	default:
		e.log.Warn("unknown Ray job status", "job_id", k.job, "status", d.Status)
	}
}

// markStarted sends Started once.
func (e *Executor) markStarted(k key, a *attempt, d JobDetails) {
	e.mu.Lock()
	first := !a.started
	a.started = true
	e.mu.Unlock()
	if !first {
		return
	}
	at := e.cfg.Now() // the server's clock, not the head's, as for agents
	pid := 0
	if d.DriverInfo != nil {
		pid, _ = strconv.Atoi(d.DriverInfo.PID)
	}
	e.cfg.Sink(exec.Update{JobID: k.job, Attempt: k.attempt, Kind: exec.Started, At: at, PID: pid})
}

// exitOf is the Exited update of a job in a terminal status (the update's
// job, attempt and kind are set by finish).
func exitOf(d JobDetails) exec.Update {
	u := exec.Update{} // At: when the poll saw it (finish), on the server's clock
	code := -1
	if d.DriverExitCode != nil {
		code = *d.DriverExitCode
	}
	switch {
	case d.Status == StatusSucceeded:
		u.ExitCode = 0
	case code < -1 || (d.Status == StatusStopped && code == -1):
		// Python's returncode is -N for a driver killed by signal N; a
		// stopped job without one was terminated.
		sig := 15
		if code < -1 {
			sig = -code
		}
		u.ExitCode, u.Signal = 128+sig, signalName(sig)
	case d.DriverExitCode != nil:
		u.ExitCode = code
	default: // failed before its driver ran (runtime env, scheduling)
		u.ExitCode, u.Err = -1, fmt.Errorf("ray: job %s failed before its entrypoint ran: %s", d.SubmissionID, d.Message)
	}
	return u
}

func signalName(sig int) string {
	switch sig {
	case 9:
		return "killed"
	case 15:
		return "terminated"
	case 2:
		return "interrupt"
	}
	return "signal " + strconv.Itoa(sig)
}

// finish forgets the attempt and reports its end.
func (e *Executor) finish(k key, u exec.Update) {
	e.mu.Lock()
	_, ok := e.tasks[k]
	delete(e.tasks, k)
	e.mu.Unlock()
	if !ok {
		return
	}
	u.JobID, u.Attempt, u.Kind = k.job, k.attempt, exec.Exited
	if u.At.IsZero() {
		u.At = e.cfg.Now()
	}
	e.cfg.Sink(u)
}

// copyLogs appends what Ray's log of the attempt holds beyond what was
// already copied to the attempt's LogPath.
func (e *Executor) copyLogs(ctx context.Context, a *attempt) {
	if a.task.LogPath == "" {
		return
	}
	var logs string
	if err := e.call(func() (err error) { logs, err = e.c.logs(ctx, a.req.SubmissionID); return err }); err != nil {
		return
	}
	e.mu.Lock()
	off := a.logOff
	e.mu.Unlock()
	if int64(len(logs)) <= off {
		return
	}
	if err := os.MkdirAll(filepath.Dir(a.task.LogPath), 0o700); err != nil {
		e.log.Warn("job log not written", "job_id", a.task.JobID, "err", err)
		return
	}
	f, err := os.OpenFile(a.task.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		e.log.Warn("job log not written", "job_id", a.task.JobID, "err", err)
		return
	}
	defer f.Close()
	n, err := f.WriteString(logs[off:])
	e.mu.Lock()
	a.logOff += int64(n)
	e.mu.Unlock()
	if err != nil {
		e.log.Warn("job log not written", "job_id", a.task.JobID, "err", err)
	}
}

// Health reports the executor's breaker, for GET /orchestrator/status.
func (e *Executor) Health() []exec.Health {
	s := e.br.Snapshot()
	h := exec.Health{Name: "ray", Pool: e.cfg.Pool, Address: e.cfg.Address, Breaker: string(s.State), Failures: s.Failures, LastError: s.LastErr}
	if !s.Since.IsZero() {
		t := s.Since
		h.Since = &t
	}
	if !s.RetryAt.IsZero() {
		t := s.RetryAt
		h.RetryAt = &t
	}
	e.mu.Lock()
	h.Nodes = len(e.nodes)
	e.mu.Unlock()
	return []exec.Health{h}
}
