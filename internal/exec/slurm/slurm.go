// Package slurm is the executor that runs Corral's jobs on a Slurm
// cluster (`corral server --executor slurm`). Corral's core still decides
// placement: the executor registers Slurm's nodes and GPUs with the
// orchestrator (pool=slurm), and runs each attempt as one sbatch pinned to
// the placed nodes, with --no-requeue (Corral decides requeueing). It
// polls squeue for the attempts' states and, once Slurm forgets a job,
// sacct, else scontrol show job, else the exit status the batch script
// leaves beside the job's log.
//
//	orchestrator ──Start/Stop/Notice/Adopt──▶ Executor ──sbatch/scancel──▶ slurmctld
//	             ◀──Sink── poll (squeue, sacct, scontrol) ◀──────────────┘
//	             ◀──RegisterNode/NodeSeen/NodeDown── poll (scontrol show node)
//
// Every Slurm command goes through a Runner, so tests run the executor on
// recorded outputs.
package slurm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// NodeBook is the part of the orchestrator that keeps the node registry,
// as the agents' pool uses it, plus what Slurm's node states need.
type NodeBook interface {
	exec.NodeBook
	// SetNodeState cordons ("cordon") or uncordons ("uncordon") a node.
	SetNodeState(ctx context.Context, nodeID, action string) (api.NodeAction, error)
}

// Config is what an Executor needs.
type Config struct {
	Runner    Runner // required
	Sink      exec.Sink
	Book      NodeBook // nil: nodes are not registered (tests)
	Partition string   // --slurm-partition: only its nodes, and every sbatch goes there
	Account   string   // --slurm-account
	// Grace is how long before Slurm's own time limit the batch step gets
	// SIGTERM (--signal); the server's --cancel-grace. Default 10s.
	Grace time.Duration
	// Poll is how often squeue and scontrol are asked. Default 2s.
	Poll time.Duration
	// ScriptDir keeps the batch scripts (and logs and exit files of tasks
	// without a LogPath). It must be readable on the Slurm nodes.
	ScriptDir string
	Version   string
	Now       func() time.Time
	Logger    *slog.Logger
}

// Executor is an exec.Executor, Noticer and Adopter on Slurm. Safe for
// concurrent use.
type Executor struct {
	cfg Config

	mu       sync.Mutex
	attempts map[key]*attempt
	nodes    map[string]NodeInfo // as last registered
	cordoned map[string]bool     // nodes this executor cordoned because Slurm drains them
	noAcct   bool                // sacct answered that accounting is off
}

type key struct {
	job     string
	attempt int
}

// attempt is one sbatch job.
type attempt struct {
	task     exec.Task
	slurmID  string
	exitPath string
	started  bool
	stopping bool
	grace    time.Duration // of a Stop that came before the attempt's Slurm id was known
	killed   bool          // the final scancel was sent
}

var (
	_ exec.Executor = (*Executor)(nil)
	_ exec.Noticer  = (*Executor)(nil)
	_ exec.Adopter  = (*Executor)(nil)
)

// New returns an executor; Run polls Slurm.
func New(cfg Config) (*Executor, error) {
	if cfg.Runner == nil {
		return nil, errors.New("slurm: no Runner")
	}
	if cfg.ScriptDir == "" {
		return nil, errors.New("slurm: no ScriptDir")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sink == nil {
		cfg.Sink = func(exec.Update) {}
	}
	if err := os.MkdirAll(cfg.ScriptDir, 0o755); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return &Executor{cfg: cfg, attempts: map[key]*attempt{}, nodes: map[string]NodeInfo{}, cordoned: map[string]bool{}}, nil
}

// paths returns where the attempt's log, script and exit status go.
func (e *Executor) paths(t exec.Task) (logPath, scriptPath, exitPath string) {
	logPath = t.LogPath
	if logPath == "" {
		logPath = filepath.Join(e.cfg.ScriptDir, fmt.Sprintf("%s-%d.log", t.JobID, t.Attempt))
	}
	return logPath, filepath.Join(e.cfg.ScriptDir, fmt.Sprintf("%s-%d.sbatch", t.JobID, t.Attempt)), logPath + ".exit"
}

func ranksOf(t exec.Task) []exec.Rank {
	if len(t.Ranks) > 0 {
		return t.Ranks
	}
	return []exec.Rank{{NodeID: t.NodeID, GPUs: t.GPUs, GPUUUIDs: t.GPUUUIDs}}
}

// Start writes the attempt's batch script and submits it with sbatch. It
// returns once Slurm has the job; Started follows when squeue says
// RUNNING. A second Start of the same attempt does nothing.
func (e *Executor) Start(ctx context.Context, t exec.Task) error {
	if t.Image != "" {
		return fmt.Errorf("slurm: the Slurm executor does not run container images (image %s): run the job on Corral's agents (pool %q), or without --image", t.Image, "agents")
	}
	k := key{t.JobID, t.Attempt}
	e.mu.Lock()
	_, dup := e.attempts[k]
	master := ""
	ranks := ranksOf(t)
	if n, ok := e.nodes[ranks[0].NodeID]; ok {
		master = n.Addr
	}
	e.mu.Unlock()
	if dup {
		return nil
	}
	if ranks[0].NodeID == "" {
		return errors.New("slurm: the task has no node")
	}
	logPath, scriptPath, exitPath := e.paths(t)
	os.Remove(exitPath) // an exit status left from an earlier server's try
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return fmt.Errorf("slurm: log directory: %w", err)
	}
	body := script(scriptSpec{Task: t, Ranks: ranks, MasterAddr: master, MasterPort: api.MasterPort(t.JobID, t.Attempt), ExitPath: exitPath})
	if err := os.WriteFile(scriptPath, []byte(body), 0o700); err != nil {
		return fmt.Errorf("slurm: batch script: %w", err)
	}
	args := append(sbatchArgs(e.cfg, t, ranks, logPath), scriptPath)
	out, err := e.cfg.Runner.Run(ctx, "sbatch", args...)
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	id, err := ParseJobID(out)
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	e.mu.Lock()
	e.attempts[k] = &attempt{task: t, slurmID: id, exitPath: exitPath}
	e.mu.Unlock()
	e.cfg.Logger.Info("slurm job submitted", "job_id", t.JobID, "attempt", t.Attempt, "slurm_job", id, "nodes", len(ranks))
	return nil
}

// Adopt takes back an attempt that was running when the server stopped.
// It only records it: the next poll looks it up by its job name (squeue
// --name), and polls it as if started here if Slurm has it; if not, the
// exit status beside its log ends it, else it is lost. (Adopt runs while
// the orchestrator recovers, before its sink may be called.)
func (e *Executor) Adopt(ctx context.Context, t exec.Task) error {
	k := key{t.JobID, t.Attempt}
	_, _, exitPath := e.paths(t)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.attempts[k]; !dup {
		e.attempts[k] = &attempt{task: t, exitPath: exitPath}
	}
	return nil
}

// adopt looks an adopted attempt up by its job name. Error: Slurm did not
// answer; the attempt stays, without a Slurm id, to be looked up again.
func (e *Executor) adopt(ctx context.Context, a *attempt) error {
	t := a.task
	out, err := e.cfg.Runner.Run(ctx, "squeue", "-h", "-t", "all", "--name="+JobName(t.JobID, t.Attempt), "-o", "%i|%T")
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	id, state := "", ""
	for i, st := range ParseSqueue(out) {
		if id == "" || !final(st) {
			id, state = i, st // the live one, if several
		}
	}
	if id == "" {
		e.finish(a, JobInfo{})
		return nil
	}
	e.mu.Lock()
	a.slurmID = id
	e.mu.Unlock()
	e.cfg.Logger.Info("slurm job adopted", "job_id", t.JobID, "attempt", t.Attempt, "slurm_job", id, "state", state)
	if running(state) {
		e.started(a) // so that Stop signals it, and a start the server missed is known
	}
	return nil
}

// Stop asks the attempt to end: SIGTERM (scancel --batch --signal=TERM
// to a one-node attempt's batch shell, which passes it to the job;
// scancel --signal=TERM to a gang's step, so to every rank), then scancel
// after grace. A job Slurm
// has not started yet is canceled at once.
func (e *Executor) Stop(ctx context.Context, jobID string, attempt int, grace time.Duration) error {
	e.mu.Lock()
	a := e.attempts[key{jobID, attempt}]
	if a == nil || a.stopping && grace > 0 {
		e.mu.Unlock()
		return nil
	}
	a.stopping = true
	id, started := a.slurmID, a.started
	e.mu.Unlock()
	if id == "" {
		a.grace = grace // an adopted attempt not looked up yet: stopped when it is (syncJobs)
		return nil
	}
	e.signal(ctx, jobID, attempt, id, started, grace)
	return nil
}

// signal sends SIGTERM to a started attempt and scancel after grace; an
// attempt not started yet (or grace 0) is canceled at once.
func (e *Executor) signal(ctx context.Context, jobID string, attempt int, id string, started bool, grace time.Duration) {
	if !started || grace <= 0 {
		e.kill(ctx, jobID, attempt)
		return
	}
	args := []string{"--signal=TERM", id} // a gang: every step, so its ranks
	e.mu.Lock()
	if a := e.attempts[key{jobID, attempt}]; a != nil && len(ranksOf(a.task)) == 1 {
		args = []string{"--batch", "--signal=TERM", id} // one node: the batch shell, which passes it on
	}
	e.mu.Unlock()
	if _, err := e.cfg.Runner.Run(ctx, "scancel", args...); err != nil {
		e.cfg.Logger.Warn("slurm: scancel --signal=TERM failed", "job_id", jobID, "slurm_job", id, "err", err)
	}
	time.AfterFunc(grace, func() { e.kill(context.WithoutCancel(ctx), jobID, attempt) })
}

// kill sends the final scancel, unless the attempt is already gone.
func (e *Executor) kill(ctx context.Context, jobID string, attempt int) {
	e.mu.Lock()
	a := e.attempts[key{jobID, attempt}]
	if a == nil || a.killed {
		e.mu.Unlock()
		return
	}
	id := a.slurmID
	if id == "" {
		e.mu.Unlock()
		return
	}
	a.killed = true
	e.mu.Unlock()
	if _, err := e.cfg.Runner.Run(ctx, "scancel", id); err != nil {
		e.cfg.Logger.Warn("slurm: scancel failed", "job_id", jobID, "slurm_job", id, "err", err)
	}
}

// Notice writes text to the attempt's NoticePath (CORRAL_PREEMPT_NOTICE),
// which the job reads on Slurm's nodes through the shared data directory.
func (e *Executor) Notice(ctx context.Context, jobID string, attempt int, text string) error {
	e.mu.Lock()
	a := e.attempts[key{jobID, attempt}]
	e.mu.Unlock()
	if a == nil || a.task.NoticePath == "" {
		return nil
	}
	tmp := a.task.NoticePath + ".tmp"
	if err := os.WriteFile(tmp, []byte(text+"\n"), 0o644); err != nil {
		return fmt.Errorf("slurm: notice: %w", err)
	}
	if err := os.Rename(tmp, a.task.NoticePath); err != nil {
		return fmt.Errorf("slurm: notice: %w", err)
	}
	return nil
}

// final reports whether a Slurm job state is an end. COMPLETING (its
// epilog runs) and PREEMPTED (it may be requeued or resumed by Slurm's
// preemption mode) are not.
func final(state string) bool {
	switch baseState(state) {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED":
		return true
	}
	return false
}

// baseState drops what sacct adds to a state ("CANCELLED by 0").
func baseState(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), " ")
	return strings.TrimRight(s, "+")
}

// running reports whether the job's processes run (or ran, and end now).
func running(state string) bool {
	switch baseState(state) {
	case "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "PREEMPTED":
		return true
	}
	return false
}

// exitUpdate is the Exited update of an attempt that Slurm reports as
// info (State "" when Slurm no longer knows it): the exit status the
// batch script wrote wins; else Slurm's ExitCode; else, with no trace of
// an end, the attempt is lost.
func (e *Executor) exitUpdate(a *attempt, info JobInfo) exec.Update {
	u := exec.Update{JobID: a.task.JobID, Attempt: a.task.Attempt, Kind: exec.Exited, At: e.cfg.Now()}
	code, fromFile := readExit(a.exitPath)
	st := baseState(info.State)
	switch {
	case st == "NODE_FAIL" || st == "BOOT_FAIL":
		u.Lost, u.ExitCode = api.ReasonNodeLost, -1
		u.Err = fmt.Errorf("slurm job %s ended %s", a.slurmID, st)
		return u
	case fromFile:
		u.ExitCode = code
	case info.HasExit && info.Signal != 0:
		u.ExitCode = 128 + info.Signal
	case info.HasExit && st != "CANCELLED":
		u.ExitCode = info.ExitCode
	case st == "CANCELLED" || st == "TIMEOUT" || st == "DEADLINE" || st == "OUT_OF_MEMORY":
		u.ExitCode = 137 // killed before the batch step could write its status
	default:
		u.Lost, u.ExitCode = api.ReasonLost, -1
		if a.slurmID == "" {
			u.Err = fmt.Errorf("slurm has no job named %s and it left no exit status", JobName(a.task.JobID, a.task.Attempt))
		} else {
			u.Err = fmt.Errorf("slurm job %s is gone and left no exit status", a.slurmID)
		}
		return u
	}
	switch u.ExitCode {
	case 137:
		u.Signal = "killed"
	case 143:
		u.Signal = "terminated"
	}
	u.TimedOut = st == "TIMEOUT" || st == "DEADLINE"
	u.OOMKilled = st == "OUT_OF_MEMORY"
	return u
}

// readExit reads the exit status the batch script left.
func readExit(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return n, true
}

// Owns reports whether node is one of the Slurm nodes this executor has
// registered: a mixed cluster's router sends that node's tasks here.
func (e *Executor) Owns(node string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.nodes[node]
	return ok
}
