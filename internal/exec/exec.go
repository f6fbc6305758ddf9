// Package exec defines the small interface between Corral's orchestrator and
// whatever runs jobs: the local node agent first, Ray, Slurm or Kubernetes
// later. An executor starts a job's processes, stops them on request, and
// reports what happened through a Sink; it never changes job state itself.
package exec

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Task is one attempt of one job, placed on GPUs of one or more nodes (a
// gang: one rank per node).
type Task struct {
	JobID   string
	Attempt int               // the job's retry_count when this attempt started; tells stale reports apart
	Command string            // run with /bin/sh -c
	Workdir string            // empty: the executor's own working directory
	Env     map[string]string // the job's env; the executor adds CUDA_VISIBLE_DEVICES and CORRAL_*
	User    string            // the job's owner; an agent running as root runs the job as this account
	Ranks   []Rank            // rank 0 first; its node is the gang's master
	// Rank 0 again, for executors that run single-node jobs only.
	NodeID   string
	GPUs     []int    // GPU indexes on the node, in CUDA_VISIBLE_DEVICES order
	GPUUUIDs []string // the same GPUs' UUIDs
	LogPath  string   // where rank 0's stdout and stderr go (appended)
	// NoticePath is where a preemption notice will appear; the job finds
	// it in CORRAL_PREEMPT_NOTICE. Empty: no notices.
	NoticePath string
	// MemMiB and CPUs limit each rank (the job's mem_mib and cpus); 0:
	// the node's default.
	MemMiB int64
	CPUs   float64
	// MIGDevices, GPUShareMiB and GPUCompute: the job has a part of its
	// one GPU, a MIG slice (its UUID) or an MPS share (api.TaskSpec's).
	MIGDevices  []string
	GPUShareMiB int64
	GPUCompute  int
	// TimeLimit is the job's time_limit (0: none). The orchestrator stops
	// the attempt when it runs past it; an executor whose engine needs a
	// limit of its own (Slurm's --time) sets it a little later.
	TimeLimit time.Duration
	// Batch scripts and Slurm's submit options (api.JobIO).
	// Script, when set, is run with its own #! line, Command being its
	// arguments. Output and Error are patterns (batchscript.Expand) of
	// files on the node that also get the job's stdout and stderr; Name,
	// ArrayJobID and ArrayTask fill %x, %A and %a. Signal is sent Lead
	// seconds before TimeLimit ("[B:]SIG@SECONDS", batchscript.Signal).
	Script, Output, Error, Signal string
	Name, ArrayJobID              string
	ArrayTask                     *int
	// Image is the OCI image the task runs in ("": on the node itself),
	// Mounts its bind mounts (SRC:DST[:ro]). An executor that cannot run
	// images reports a task with one as not started (Exited, Err).
	Image  string
	Mounts []string
	// Placed is when the attempt was handed out (its last scheduled
	// event), for an attempt adopted after a restart; zero: now. An
	// executor dates a start no earlier than this.
	Placed time.Time
}

// Rank is the part of a gang on one node.
type Rank struct {
	NodeID   string
	GPUs     []int
	GPUUUIDs []string
}

// UpdateKind says what an Update reports.
type UpdateKind int

const (
	// Started: the job's process is running (PID set).
	Started UpdateKind = iota + 1
	// Exited: the job's process ended (ExitCode, Signal set), or never
	// started (Err set).
	Exited
)

func (k UpdateKind) String() string {
	switch k {
	case Started:
		return "started"
	case Exited:
		return "exited"
	}
	return "unknown"
}

// Update is a report from an executor about one attempt.
type Update struct {
	JobID    string
	Attempt  int
	Kind     UpdateKind
	At       time.Time
	PID      int    // Started
	ExitCode int    // Exited: the process's exit code, or 128+signal when killed
	Signal   string // Exited: the signal that killed it ("killed", "terminated"), if any
	Err      error  // Exited: the process could not be started, or was lost
	// Lost, on Exited, says the attempt's processes are gone without an
	// exit status: "lost" (its agent restarted without it, or the server
	// restarted and it is not there) or "node_lost" (its node went silent).
	Lost string
	// OOMKilled, on Exited: the kernel's OOM killer acted in the attempt's
	// cgroup (it hit its memory limit).
	OOMKilled bool
	// TimedOut, on Exited: the engine that ran the attempt stopped it at
	// its time limit (Slurm's TIMEOUT); the job ends with reason
	// time_limit.
	TimedOut bool
	// Unstarted, on Exited with Lost: no rank of the attempt ever ran.
	// Every node it was placed on came back without it and none had
	// reported it (its agent never got it, or never launched it). An
	// attempt adopted after a restart before it was known to run is then
	// requeued without counting a retry.
	Unstarted bool
	// ImageDigest, on Started: the image the attempt runs in, by digest.
	ImageDigest string
}

// Sink receives updates. It must not block: executors call it from their own
// goroutines, and also from inside Start.
type Sink func(Update)

// Noticer is an Executor that can warn a running attempt before stopping
// it: it writes text to the attempt's NoticePath, where the job can read
// it (to checkpoint) between SIGTERM and SIGKILL.
type Noticer interface {
	Notice(ctx context.Context, jobID string, attempt int, text string) error
}

// Adopter is an Executor that can take back tasks that were running when
// the server stopped: Adopt is Start for a task that may still be running
// (it is not started again if it is), and reports it lost if it is not.
// Without it, such tasks are recorded as lost at start-up.
type Adopter interface {
	Adopt(ctx context.Context, t Task) error
}

// Settler is an Executor that keeps what it needs to report an ended
// attempt again (an agent keeps the task's record on its node) until the
// orchestrator has durably recorded that end: Settled says it has. An
// attempt whose end was reported, but not yet committed when the server
// died, is then reported again, with its real exit code, after the
// restart. Settled of an attempt the executor does not keep is a no-op.
type Settler interface {
	Settled(jobID string, attempt int)
}

// Executor runs tasks. Implementations are safe for concurrent use.
type Executor interface {
	// Start launches the task and returns once its process runs, or with an
	// error if it could not be launched (then no Exited update follows). A
	// Started update, then an Exited update, are sent to the sink.
	Start(ctx context.Context, t Task) error
	// Stop asks the attempt to end: SIGTERM to its whole process group, then
	// SIGKILL after grace. It returns at once; the Exited update follows. Stop
	// of an attempt that is not running is not an error.
	Stop(ctx context.Context, jobID string, attempt int, grace time.Duration) error
}

// NodeBook is the part of the orchestrator that keeps the node registry,
// as an engine's executor (Slurm, Ray, Kubernetes) feeds it the nodes it
// learns from its engine.
type NodeBook interface {
	// RegisterNode records a node durably.
	RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error
	// NodeSeen records that the node is alive. It must not block.
	NodeSeen(nodeID string, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time)
	// NodeDown marks the node down at once (nothing new is placed there;
	// its jobs keep their state). It must not block.
	NodeDown(nodeID string, at time.Time)
}
