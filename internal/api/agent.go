package api

import "time"

// The agent protocol: how a node agent (`corral agent`, or the in-process
// agent of `corral up`) talks to the control plane. The agent pulls: it
// registers, then reports and asks for work in one call (Sync), which the
// server holds open (long poll) until there is something new for the node
// or the wait runs out. Every call carries the join token as a bearer token.
//
//	POST /agent/v1/register  AgentRegistration -> AgentConfig
//	POST /agent/v1/sync      AgentReport       -> AgentWork
//	POST /agent/v1/logs      LogChunk          -> 204

// AgentRegistration introduces a node: who it is and what GPUs it has.
type AgentRegistration struct {
	NodeID string `json:"node_id"`
	// AgentID names the agent's state (its data directory), kept across
	// its restarts: while one agent's node is live, another agent may not
	// take the same node id. Required: 16 to 128 letters, digits, '.',
	// '_' or '-'.
	AgentID   string            `json:"agent_id,omitempty"`
	Hostname  string            `json:"hostname"`
	Address   string            `json:"address,omitempty"` // where other nodes reach it (CORRAL_MASTER_ADDR); default: the address it connects from
	Labels    map[string]string `json:"labels,omitempty"`
	GPUs      []AgentGPU        `json:"gpus"`
	Simulated bool              `json:"simulated,omitempty"`
	Version   string            `json:"version,omitempty"`
	// Tasks the agent already runs (adopted after an agent restart) or has
	// seen end. Any task the server placed on this node and that is not
	// listed here is lost.
	Tasks []TaskStatus `json:"tasks"`
	// Now is the agent's clock as it sends this: the server measures the
	// tasks' times against it (AgentReport.Now).
	Now *time.Time `json:"now,omitempty"`
	// DiskFull is as in AgentReport: set when the node's log disk is
	// under the agent's --min-free-disk, so no job lands there before its
	// first report.
	DiskFull string `json:"disk_full,omitempty"`
	// Containment is how the node holds its jobs: cgroup-v2, cgroup-v1, or
	// process-group where cgroups cannot be written. Empty: an agent that
	// does not say (shown as process-group).
	Containment string `json:"containment,omitempty"`
}

// The containments a node can register (AgentRegistration.Containment,
// Node.Containment).
const (
	ContainCgroupV2     = "cgroup-v2"
	ContainCgroupV1     = "cgroup-v1"
	ContainProcessGroup = "process-group"
)

// AgentGPU is one GPU of a registering node.
type AgentGPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MemoryMiB   int64  `json:"memory_mib"`
	NVLinkPeers []int  `json:"nvlink_peers,omitempty"`
	Simulated   bool   `json:"simulated,omitempty"`
	MIG         *MIG   `json:"mig,omitempty"`
	// Shared: the node runs MPS shares on this GPU (corral agent
	// --shared-gpus); it takes jobs that ask for a share of it.
	Shared bool `json:"shared,omitempty"`
}

// AgentConfig is the server's answer to a registration.
type AgentConfig struct {
	NodeID            string  `json:"node_id"`
	HeartbeatInterval Seconds `json:"heartbeat_interval"` // report at least this often
	NodeTTL           Seconds `json:"node_ttl"`           // silent longer than this, the node is down
	// Session binds the node to this registration: later syncs and log
	// shipments for the node must carry it (header AgentSessionHeader).
	// A node may report only for itself; a new registration of the node
	// ends the old session.
	Session string `json:"session,omitempty"`
}

// AgentSessionHeader carries AgentConfig.Session on /agent/v1/sync and
// /agent/v1/logs.
const AgentSessionHeader = "X-Corral-Agent-Session"

// AgentReport is what a node says in each sync: its telemetry and the state
// of every task it runs or has just finished. Generation is the last work
// generation the agent applied; the server answers when it has a newer one.
type AgentReport struct {
	NodeID     string           `json:"node_id"`
	Generation uint64           `json:"generation"`
	Wait       Seconds          `json:"wait,omitempty"` // how long the server may hold the call; 0: answer at once
	Telemetry  []GPUReading     `json:"telemetry,omitempty"`
	Tasks      []TaskStatus     `json:"tasks"`
	Foreign    []ForeignProcess `json:"foreign,omitempty"`
	// Now is the agent's clock as it sends this. The server keeps its own
	// times: a task's started_at or finished_at T becomes, on the
	// server's clock, the server's now - (Now - T), never in the future
	// nor before the task was handed out; without Now, the time the
	// server hears of it.
	Now *time.Time `json:"now,omitempty"`
	// DiskFull, when set, says that the node's log disk has less free
	// than the agent's --min-free-disk (and how much): it takes no new
	// jobs until a report without it.
	DiskFull string `json:"disk_full,omitempty"`
}

// GPUReading is a live reading of one GPU.
type GPUReading struct {
	Index         int   `json:"index"`
	Utilization   int   `json:"utilization"`     // percent
	MemoryUsedMiB int64 `json:"memory_used_mib"` // MiB
	Temperature   *int  `json:"temperature"`     // Celsius; null when unknown
	// ECCErrors counts uncorrected ECC errors (volatile); 0 or absent:
	// none. A rise raises an admin alert (docs/notifications.md).
	ECCErrors int64 `json:"ecc_errors,omitempty"`
}

// ForeignProcess is a compute process on a GPU that Corral did not start.
type ForeignProcess struct {
	GPU  int    `json:"gpu"`
	PID  int    `json:"pid"`
	User string `json:"user,omitempty"`
	Name string `json:"name,omitempty"`
}

// Task states as agents report them.
const (
	TaskRunning = "running"
	TaskExited  = "exited" // ended (ExitCode, Signal) or never started (Error)
	// TaskPreparing: the agent holds the task but has not started it yet
	// (it is fetching the job's image). The job's clock has not started:
	// the server counts the task as listed, nothing more.
	TaskPreparing = "preparing"
)

// TaskStatus is one task (one rank of one attempt of a job) on a node.
type TaskStatus struct {
	JobID      string     `json:"job_id"`
	Attempt    int        `json:"attempt"`
	Rank       int        `json:"rank"`
	State      string     `json:"state"` // running or exited
	PID        int        `json:"pid,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ExitCode   int        `json:"exit_code"`
	Signal     string     `json:"signal,omitempty"`
	Error      string     `json:"error,omitempty"` // could not start
	LogSize    int64      `json:"log_size,omitempty"`
	OOMKilled  bool       `json:"oom_killed,omitempty"` // the kernel's OOM killer killed a process of the task's cgroup
	// ImageDigest is the image the task runs in, by digest (REF@sha256:…),
	// for a job with an image; reported once it has started.
	ImageDigest string `json:"image_digest,omitempty"`
}

// AgentWork is the server's answer to a sync: the tasks the node should be
// running (the desired state, complete: a task not listed should not run)
// and what to tell tasks being stopped.
type AgentWork struct {
	Generation uint64     `json:"generation"`
	Tasks      []TaskSpec `json:"tasks"`
}

// TaskSpec is one rank of one attempt of a job, as a node runs it.
type TaskSpec struct {
	JobID      string            `json:"job_id"`
	Attempt    int               `json:"attempt"`
	Rank       int               `json:"rank"`
	NumNodes   int               `json:"num_nodes"`
	MasterAddr string            `json:"master_addr"`
	MasterPort int               `json:"master_port"`
	Command    string            `json:"command"`
	Workdir    string            `json:"workdir,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	User       string            `json:"user,omitempty"` // the job's owner: an agent running as root runs it as this account
	GPUs       []int             `json:"gpus"`
	GPUUUIDs   []string          `json:"gpu_uuids,omitempty"`
	// MIGDevices are the UUIDs ("MIG-…") of the MIG devices the task
	// holds, each on one of GPUs (a slice placed as a unit): the task sees
	// those alone (CUDA_VISIBLE_DEVICES) and its cgroup opens their
	// capabilities alone. Empty: its GPUs whole.
	MIGDevices []string `json:"mig_devices,omitempty"`
	// GPUShareMiB, when set, makes the task an MPS share of its one GPU
	// (a GPU its node marks shared): its memory on the GPU, pinned by MPS
	// (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). GPUCompute is its share of the
	// GPU's compute, in percent (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; 0:
	// 100). The job asks for them as gpu_share and gpu_compute.
	GPUShareMiB int64 `json:"gpu_share_mib,omitempty"`
	GPUCompute  int   `json:"gpu_compute,omitempty"`
	// Stop, when set, asks the task to end: SIGTERM now (after writing
	// Notice to the task's notice file, if any), SIGKILL after StopGrace.
	Stop      bool    `json:"stop,omitempty"`
	StopGrace Seconds `json:"stop_grace,omitempty"`
	Notice    string  `json:"notice,omitempty"`
	// MemMiB and CPUs limit the task's cgroup (the job's mem_mib and
	// cpus); 0: the agent's per-GPU default, or no limit.
	MemMiB int64   `json:"mem_mib,omitempty"`
	CPUs   float64 `json:"cpus,omitempty"`
	// Script is a batch script's body: the node writes it to a private
	// executable file and runs it, Command being its arguments. Output
	// and Error are files (paths expanded, relative to Workdir) that get
	// the job's stdout and stderr too, written as the job's account.
	// Signal ("USR1", or "B:USR1" for the main process only) is sent
	// SignalAfter from the task's start (sbatch --signal).
	Script      string  `json:"script,omitempty"`
	Output      string  `json:"output,omitempty"`
	Error       string  `json:"error,omitempty"`
	Signal      string  `json:"signal,omitempty"`
	SignalAfter Seconds `json:"signal_after,omitempty"`
	// Image is the OCI image the task runs in (the job's image; "": on
	// the node itself), Mounts its bind mounts (SRC:DST[:ro]).
	Image  string   `json:"image,omitempty"`
	Mounts []string `json:"mounts,omitempty"`
}

// LogChunk is part of a task's output, shipped by a remote agent so that the
// server can serve it. Offset is where Data starts in the task's log.
type LogChunk struct {
	NodeID  string `json:"node_id"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Rank    int    `json:"rank"`
	Offset  int64  `json:"offset"`
	Data    []byte `json:"data"`
}

// NodeAction is POST /cluster/nodes/{node_id}/{cordon|drain|uncordon}'s answer.
type NodeAction struct {
	NodeID string `json:"node_id"`
	State  string `json:"state"`
}
