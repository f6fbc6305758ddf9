// Package api holds the wire types of Corral's HTTP API: what the server
// answers and what the CLI and other clients send. Field names follow
// SPEC.md (snake_case JSON). The package has no behaviour beyond parsing and
// formatting these values, so both sides of the wire can import it.
package api

import "time"

// State is a job's lifecycle state. The names are the seed's, exactly.
type State string

// The job states, in lifecycle order.
const (
	StateQueued     State = "queued"
	StateScheduled  State = "scheduled"
	StateAllocating State = "allocating"
	StateRunning    State = "running"
	StateCompleted  State = "completed"
	StateFailed     State = "failed"
	StateCanceled   State = "canceled"
)

// States lists every job state in lifecycle order.
var States = []State{StateQueued, StateScheduled, StateAllocating, StateRunning, StateCompleted, StateFailed, StateCanceled}

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled
}

// Active reports whether a job in state s holds (or is about to hold) GPUs.
func (s State) Active() bool {
	return s == StateScheduled || s == StateAllocating || s == StateRunning
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Event reasons: short machine-readable codes recorded with each transition.
const (
	ReasonSubmitted   = "submitted"
	ReasonScheduled   = "scheduled"
	ReasonAllocating  = "allocating"
	ReasonStarted     = "started"
	ReasonExited      = "exited"       // the process ended with exit code 0
	ReasonExitCode    = "exit_code"    // the process ended with a non-zero code or a signal
	ReasonStartFailed = "start_failed" // the process could not be started (bad workdir, ...)
	ReasonCanceled    = "canceled"
	ReasonLost        = "lost"      // the job's processes died with the server or agent
	ReasonNodeLost    = "node_lost" // the job's node stopped reporting
	ReasonRequeued    = "requeued"
	ReasonPreempted   = "preempted"  // stopped for a higher-ranked job; back to queued
	ReasonTimeLimit   = "time_limit" // ran past its time_limit and was stopped
)

// ReasonOutOfMemory: the job failed after the kernel's OOM killer acted in
// its cgroup (it hit its mem_mib limit).
const ReasonOutOfMemory = "out_of_memory"

// Allocation is one GPU held by a job.
type Allocation struct {
	NodeID    string  `json:"node_id"`
	GPUID     int     `json:"gpu_id"`
	GPUUUID   string  `json:"gpu_uuid"`
	MemoryGB  float64 `json:"memory_gb"`
	Simulated bool    `json:"simulated,omitempty"`
	// A part of the GPU (gpushare.go): a MIG slice (MIG), or an MPS share
	// of ShareMiB memory and ShareCompute percent of its compute.
	// Fraction is the part in GPU-equivalents (what accounting charges);
	// 0 for a whole GPU, which counts 1.
	MIG          *AllocatedSlice `json:"mig,omitempty"`
	ShareMiB     int64           `json:"share_mib,omitempty"`
	ShareCompute int             `json:"share_compute,omitempty"`
	Fraction     float64         `json:"fraction,omitempty"`
}

// Event is one state transition of a job.
type Event struct {
	At      time.Time `json:"at"`
	From    State     `json:"from,omitempty"`
	To      State     `json:"to"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	ID                 string            `json:"id"`
	Number             int64             `json:"number,omitempty"` // short number, unique and increasing; a task carries its array's (ShortID: NUMBER_INDEX); 0: none
	Name               string            `json:"name,omitempty"`
	User               string            `json:"user"`
	Project            string            `json:"project"`
	Command            string            `json:"command"`
	Workdir            string            `json:"workdir,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	GPUCount           int               `json:"gpu_count"`
	GPUMemoryGB        float64           `json:"gpu_memory_gb,omitempty"`
	GPUType            string            `json:"gpu_type,omitempty"`
	Nodes              int               `json:"nodes"`
	Priority           Priority          `json:"priority"`
	EstimatedDuration  *Seconds          `json:"estimated_duration,omitempty"`
	TimeLimit          *Seconds          `json:"time_limit,omitempty"` // a running attempt past this is stopped (reason time_limit)
	TimedOut           bool              `json:"timed_out,omitempty"`  // being stopped for running past its time_limit
	MaxRetries         int               `json:"max_retries"`
	State              State             `json:"state"`
	Reason             string            `json:"reason,omitempty"`  // the reason of the latest transition
	Message            string            `json:"message,omitempty"` // a sentence about the latest transition
	SubmittedAt        time.Time         `json:"submitted_at"`
	StartedAt          *time.Time        `json:"started_at,omitempty"`
	FinishedAt         *time.Time        `json:"finished_at,omitempty"`
	ExitCode           *int              `json:"exit_code,omitempty"`
	RetryCount         int               `json:"retry_count"`
	QueuePosition      int               `json:"queue_position,omitempty"`
	EstimatedStartTime *time.Time        `json:"estimated_start_time,omitempty"`
	// EstimatedStartLow and EstimatedStartHigh bound the estimated start:
	// the plan made with the low ends and with the high ends of the
	// learned run-time estimates ahead (docs/scheduling.md); equal to it
	// without learned estimates. EstimateBasis says where the job's own
	// run-time estimate comes from ("from 12 runs of resnet-sweep by
	// ana"), for a queued or running job.
	EstimatedStartLow  *time.Time        `json:"estimated_start_low,omitempty"`
	EstimatedStartHigh *time.Time        `json:"estimated_start_high,omitempty"`
	EstimateBasis      string            `json:"estimate_basis,omitempty"`
	PendingReason      string            `json:"pending_reason,omitempty"`  // machine-readable, queued jobs only; see PendingCause
	PendingCause       string            `json:"pending_cause,omitempty"`   // the precise reason: PendingReason, told apart where that says "reservation" (PendingReasonOf)
	PendingMessage     string            `json:"pending_message,omitempty"` // the "why pending" sentence
	CancelRequested    bool              `json:"cancel_requested,omitempty"`
	PreemptGrace       *Seconds          `json:"preempt_grace,omitempty"` // SIGTERM to SIGKILL when preempted; default: the policy's
	Borrowed           bool              `json:"borrowed,omitempty"`      // running on GPUs borrowed beyond a quota
	Preempting         bool              `json:"preempting,omitempty"`    // told to stop for another job; back to queued when it ends
	PreemptMessage     string            `json:"preempt_message,omitempty"`
	Preemptions        int               `json:"preemptions,omitempty"` // times it was preempted (each also counts in retry_count)
	GPUSeconds         float64           `json:"gpu_seconds,omitempty"` // GPU time used over all attempts
	Idle               bool              `json:"idle,omitempty"`        // its GPUs stayed under the idle threshold for the idle window
	IdleSince          *time.Time        `json:"idle_since,omitempty"`
	NotBefore          *time.Time        `json:"not_before,omitempty"`  // requeued after a loss: not started again before this (backoff)
	NodeLabels         map[string]string `json:"node_labels,omitempty"` // runs only on nodes with all these labels
	MemMiB             int64             `json:"mem_mib,omitempty"`     // memory limit of each rank's cgroup, MiB; 0: the agent's default
	CPUs               float64           `json:"cpus,omitempty"`        // CPU limit of each rank's cgroup; 0: the agent's default
	// A task of a job array: its id is ArrayJobID + "_" + ArrayTaskID.
	ArrayJobID  string `json:"array_job_id,omitempty"`
	ArrayTaskID *int   `json:"array_task_id,omitempty"`
	// DependsOn is the job's dependency expression (Slurm's grammar, e.g.
	// "afterok:ID:ID,afterany:ID"), as submitted; empty: none.
	DependsOn  string       `json:"depends_on,omitempty"`
	Allocation []Allocation `json:"allocation"`
	// NodeID is the node its current or last attempt was placed on (rank
	// 0's, for a job on several nodes); empty while it waits in the
	// queue. It is a job of no GPUs' only record of its node: its
	// allocation names none (a restarted server adopts it there).
	NodeID string  `json:"node_id,omitempty"`
	Events []Event `json:"events,omitempty"`

	// Elastic GPU count: with GPUCountMin > 0 the job takes
	// from GPUCountMin to GPUCount GPUs on one node, after waiting up to
	// ElasticWait (from submission) for GPUCount. GrantedGPUs is what its
	// current or last attempt got, for every job (len(Allocation) while
	// it runs); 0 before its first start.
	GPUCountMin int      `json:"gpu_count_min,omitempty"`
	ElasticWait *Seconds `json:"elastic_wait,omitempty"`
	GrantedGPUs int      `json:"granted_gpus,omitempty"`
	// Notify chooses the job's notifications (ParseNotify, notify.go);
	// empty: the defaults. NotifyTasks: an array's tasks notify one by one.
	Notify      string `json:"notify,omitempty"`
	NotifyTasks bool   `json:"notify_tasks,omitempty"`
	// Class is the job's preemption class: ClassBatch (empty
	// means batch), ClassInteractive or ClassInteractivePreemptible.
	Class string `json:"class,omitempty"`
	// Hold is the name of the hold this job stands for: a hold queued with
	// "wait": true (docs/interactive.md).
	Hold string `json:"hold,omitempty"`
	// IdleEndsAt: an interactive job idle by its class's settings ends
	// then unless used (its owner was warned); IdleReclaimed: it is being
	// ended for it (reason idle).
	IdleEndsAt    *time.Time `json:"idle_ends_at,omitempty"`
	IdleReclaimed bool       `json:"idle_reclaimed,omitempty"`
	// Notebook: the job runs a notebook server on NotebookPort, reached
	// through /proxy/ID/ (corral notebook; notebook.go).
	Notebook bool `json:"notebook,omitempty"`
	// Reservation is the booking the job runs in; empty: none.
	Reservation string `json:"reservation,omitempty"`
	// ReservationEnded, with TimedOut: it is being stopped because its
	// booking's window ended (not flex).
	ReservationEnded bool `json:"reservation_ended,omitempty"`
	// Pool is the pool of nodes the job runs in ("agents",
	// "slurm", "ray"); empty: any.
	Pool string `json:"pool,omitempty"`
	// Image is the OCI image the job runs in ("": on the node
	// itself), Mounts the host directories bound into it (SRC:DST[:ro]).
	// ImageDigest is the image its current or last attempt ran, by digest.
	Image       string   `json:"image,omitempty"`
	Mounts      []string `json:"mounts,omitempty"`
	ImageDigest string   `json:"image_digest,omitempty"`
	// Policy is the scheduling policy that orders the job: the cluster's
	// active one (fair_share, priority, fcfs or sjf) when the answer was
	// made (the seed's orchestrationMetadata.schedulingPolicy; empty in
	// a follower's answers, read from the store).
	Policy string `json:"policy,omitempty"`
	// Batch scripts and Slurm's names (docs/jobs.md "Batch
	// scripts"); see SubmitRequest.
	JobIO
	// A MIG slice or an MPS share instead of whole GPUs (gpushare.go).
	GPUPart
	// GPUEquivalents is what the job's current or last attempt holds in
	// GPU-equivalents: its GPUs, or a slice's or share's fraction of one
	// (what fair share, usage, cost and budgets charge per second).
	GPUEquivalents float64 `json:"gpu_equivalents,omitempty"`
}

// JobIO is what a job carries of a batch script and Slurm's submit
// options, in the job and in its submission alike.
type JobIO struct {
	// Script is a batch script's body, copied at submission; the node
	// writes it to a private file and runs it with its own #! line, with
	// Command as its arguments. ScriptName is the file's name, for people.
	Script     string `json:"script,omitempty"`
	ScriptName string `json:"script_name,omitempty"`
	// Output and Error are files on the node that also get the job's
	// stdout and stderr (sbatch -o/-e), with Slurm's patterns: %j job id,
	// %x name, %u user, %A array id, %a task index, %N node, %t rank, %%.
	// Error empty: stderr goes to Output too.
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Begin: not started before this (sbatch --begin).
	Begin *time.Time `json:"begin,omitempty"`
	// Signal is sent some time before the time limit (sbatch --signal,
	// "[B:]SIG[@SECONDS]"; B: the job's main process only).
	Signal string `json:"signal,omitempty"`
	// TimeLimitFrom and EstimateFrom say where time_limit and
	// estimated_duration came from: flag, #CORRAL, #SBATCH, api, or
	// default (the server's).
	TimeLimitFrom string `json:"time_limit_from,omitempty"`
	EstimateFrom  string `json:"estimate_from,omitempty"`
}

// SubmitRequest is the body of POST /queue/submit. Priority and
// EstimatedDuration accept several spellings (see ParsePriority and
// ParseSeconds), so they arrive raw and are parsed by Validate.
type SubmitRequest struct {
	Name              string            `json:"name,omitempty"`
	User              string            `json:"user,omitempty"`
	Project           string            `json:"project,omitempty"`
	Command           string            `json:"command"`
	Workdir           string            `json:"workdir,omitempty"`
	Env               map[string]string `json:"env,omitempty"`
	GPUCount          *int              `json:"gpu_count,omitempty"`
	GPUMemoryGB       float64           `json:"gpu_memory_gb,omitempty"`
	GPUType           string            `json:"gpu_type,omitempty"`
	Nodes             int               `json:"nodes,omitempty"`
	Priority          RawValue          `json:"priority,omitempty"`
	EstimatedDuration RawValue          `json:"estimated_duration,omitempty"`
	TimeLimit         RawValue          `json:"time_limit,omitempty"`
	MaxRetries        int               `json:"max_retries,omitempty"`
	PreemptGrace      RawValue          `json:"preempt_grace,omitempty"`
	NodeLabels        map[string]string `json:"node_labels,omitempty"`
	MemMiB            *int64            `json:"mem_mib,omitempty"` // memory limit, MiB (per rank)
	CPUs              *float64          `json:"cpus,omitempty"`    // CPU limit, in CPUs (per rank)
	// Array makes the submission a job array (Slurm's --array grammar:
	// "0-99", "0-99:4", "1,5,9-12", "0-999%16").
	Array string `json:"array,omitempty"`
	// DependsOn holds the job until its dependencies are met (Slurm's
	// --dependency grammar).
	DependsOn string `json:"depends_on,omitempty"`

	// GPUCountMin makes the GPU count elastic: from it up to gpu_count
	// (one node only). ElasticWait is how long the job waits, from
	// submission, for gpu_count before taking less (a duration; default 0).
	GPUCountMin *int     `json:"gpu_count_min,omitempty"`
	ElasticWait RawValue `json:"elastic_wait,omitempty"`
	// Notify: begin,end,fail,preempt, all or none (ParseNotify); empty:
	// the defaults. NotifyTasks: an array's tasks notify one by one.
	Notify      string `json:"notify,omitempty"`
	NotifyTasks bool   `json:"notify_tasks,omitempty"`
	// Class is the job's preemption class: ClassBatch (empty
	// means batch), ClassInteractive or ClassInteractivePreemptible.
	Class string `json:"class,omitempty"`
	// Notebook: the job runs a notebook server on NotebookPort, reached
	// through /proxy/ID/ (corral notebook; notebook.go).
	Notebook bool `json:"notebook,omitempty"`
	// Reservation: run in this booking.
	Reservation string `json:"reservation,omitempty"`
	// Pool: run on this pool's nodes only.
	Pool string `json:"pool,omitempty"`
	// Script, ScriptName, Output, Error, Signal, TimeLimitFrom and
	// EstimateFrom are as in Job (JobIO). With Script, Command
	// holds the script's arguments (a shell string) and may be empty.
	Script        string `json:"script,omitempty"`
	ScriptName    string `json:"script_name,omitempty"`
	Output        string `json:"output,omitempty"`
	Error         string `json:"error,omitempty"`
	Signal        string `json:"signal,omitempty"`
	TimeLimitFrom string `json:"time_limit_from,omitempty"`
	EstimateFrom  string `json:"estimate_from,omitempty"`
	// Begin is sbatch --begin: any form timespec.At reads ("now+2hours",
	// "16:00", "tomorrow", "2026-12-01T10:00", RFC 3339), in the server's
	// time zone when the text names none.
	Begin string `json:"begin,omitempty"`
	// Image: run in this OCI image; Mounts: bind these host
	// directories into it, each SRC:DST[:ro].
	Image  string   `json:"image,omitempty"`
	Mounts []string `json:"mounts,omitempty"`
	// MIGProfile, GPUShareMiB, GPUCompute: a part of one GPU (gpushare.go).
	GPUPart
}

// QueuedJob is one row of GET /queue.
type QueuedJob struct {
	ID                 string     `json:"id"`
	Number             int64      `json:"number,omitempty"` // as Job.Number
	Name               string     `json:"name,omitempty"`
	User               string     `json:"user"`
	Project            string     `json:"project"`
	Priority           Priority   `json:"priority"`
	RequestedGPUs      int        `json:"requested_gpus"`
	Nodes              int        `json:"nodes"`
	QueuedAt           time.Time  `json:"queued_at"`
	QueuePosition      int        `json:"queue_position"`
	EstimatedStartTime *time.Time `json:"estimated_start_time"`
	EstimatedWaitTime  *float64   `json:"estimated_wait_time"` // seconds from now; null when unknown
	// EstimatedStartLow and EstimatedStartHigh bound the start, and
	// EstimateBasis says where the job's run-time estimate comes from, as
	// Job's.
	EstimatedStartLow  *time.Time `json:"estimated_start_low"`
	EstimatedStartHigh *time.Time `json:"estimated_start_high"`
	EstimateBasis      string     `json:"estimate_basis,omitempty"`
	EstimatedDuration  *Seconds   `json:"estimated_duration,omitempty"`
	WaitedSeconds      float64    `json:"waited_seconds"`
	PendingReason      string     `json:"pending_reason,omitempty"`
	PendingCause       string     `json:"pending_cause,omitempty"` // as Job's
	PendingMessage     string     `json:"pending_message,omitempty"`

	RequestedGPUsMin int    `json:"requested_gpus_min,omitempty"` // elastic: the fewest GPUs it may start with
	ArrayJobID       string `json:"array_job_id,omitempty"`       // a task of this job array
	ArrayTaskID      *int   `json:"array_task_id,omitempty"`      // its index
}

// QueueStatistics is GET /queue/statistics (and the statistics of GET /queue).
// Times are in seconds; throughput is jobs started per hour over the last hour.
type QueueStatistics struct {
	TotalQueued       int     `json:"total_queued"`
	TotalRunning      int     `json:"total_running"`
	AverageWaitTime   float64 `json:"average_wait_time"`
	WaitTimeP50       float64 `json:"wait_time_p50"`
	WaitTimeP95       float64 `json:"wait_time_p95"`
	WaitTimeP99       float64 `json:"wait_time_p99"`
	QueueThroughput   float64 `json:"queue_throughput"`
	CompletedLastHour int     `json:"completed_last_hour"`
}

// QueueResponse is GET /queue.
type QueueResponse struct {
	QueuedJobs []QueuedJob     `json:"queued_jobs"`
	Statistics QueueStatistics `json:"statistics"`
	Arrays     []Array         `json:"arrays,omitempty"` // the job arrays with queued tasks, with their counts
	// NextCursor, when set, asks for the next page (?cursor=): the queue
	// has more jobs than this page holds (docs/history.md).
	NextCursor string `json:"next_cursor,omitempty"`
}

// JobList is GET /jobs.
type JobList struct {
	Jobs   []Job   `json:"jobs"`
	Arrays []Array `json:"arrays,omitempty"` // the job arrays of the tasks listed, with their counts
	// NextCursor, when set, asks for the next page (?cursor=): older jobs
	// may match (docs/history.md).
	NextCursor string `json:"next_cursor,omitempty"`
}

// GPU is one device in GET /cluster/gpu-status. Memory is in MiB,
// utilization in percent, temperature in degrees Celsius.
type GPU struct {
	ID          int     `json:"id"`
	UUID        string  `json:"uuid"`
	Model       string  `json:"model"`
	MemoryTotal int64   `json:"memory_total"`
	MemoryUsed  int64   `json:"memory_used"`
	Utilization int     `json:"utilization"`
	Temperature *int    `json:"temperature"`    // null when unknown
	AllocatedTo *string `json:"allocated_to"`   // a job id, or a hold's id; null when free
	Held        bool    `json:"held,omitempty"` // AllocatedTo names a hold, not a Corral job
	// AllocatedNumber is the short number of the job AllocatedTo names
	// ("1234", "1234_7"); absent for a hold or a job without one.
	AllocatedNumber string `json:"allocated_number,omitempty"`
	NVLinkPeers     []int  `json:"nvlink_peers,omitempty"`
	Simulated       bool   `json:"simulated,omitempty"`
	// MIG is the GPU's Multi-Instance GPU state; absent where the GPU has
	// no MIG support.
	MIG *MIG `json:"mig,omitempty"`
	// Shared: the GPU takes MPS shares (corral agent --shared-gpus);
	// Shares are those running on it.
	Shared bool             `json:"shared,omitempty"`
	Shares []GPUShareHolder `json:"shares,omitempty"`
	// ShareLimits, on a shared GPU, says what holds each share to its
	// memory and compute: "mps" (MPS's per-client pinned memory limit and
	// active thread percentage). No driver Corral knows offers per-cgroup
	// GPU memory limits; were one to, they would be named here too.
	ShareLimits string `json:"share_limits,omitempty"`
	// Foreign lists compute processes on the GPU that Corral did not start;
	// such a GPU is not handed out while they run.
	Foreign []ForeignProcess `json:"foreign,omitempty"`
}

// Holder returns the job or hold the GPU is allocated to, "" when free.
func (g GPU) Holder() string {
	if g.AllocatedTo == nil {
		return ""
	}
	return *g.AllocatedTo
}

// Node is one node in GET /cluster/gpu-status.
type Node struct {
	NodeID    string            `json:"node_id"`
	Hostname  string            `json:"hostname"`
	GPUCount  int               `json:"gpu_count"`
	GPUType   string            `json:"gpu_type"`
	State     string            `json:"state"` // up, down, cordoned, draining, drained
	Address   string            `json:"address,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	LastSeen  *time.Time        `json:"last_seen,omitempty"`
	DiskFull  string            `json:"disk_full,omitempty"` // set while the node's log disk is under its --min-free-disk: no new jobs start there
	Simulated bool              `json:"simulated,omitempty"`
	GPUs      []GPU             `json:"gpus"`
	// Containment is how the node holds its jobs: cgroup-v2, cgroup-v1 or
	// process-group (what its agent registered; process-group if it said
	// nothing).
	Containment string `json:"containment"`
	// Pool is the pool the node belongs to: agents, ray or
	// slurm; its label "pool".
	Pool string `json:"pool"`
}

// ClusterStatus is GET /cluster/gpu-status.
type ClusterStatus struct {
	TotalGPUs     int    `json:"total_gpus"`
	AvailableGPUs int    `json:"available_gpus"`
	AllocatedGPUs int    `json:"allocated_gpus"` // held GPUs included
	HeldGPUs      int    `json:"held_gpus"`
	ForeignGPUs   int    `json:"foreign_gpus"` // busy with processes Corral did not start
	Nodes         []Node `json:"nodes"`
}

// AllocateRequest is POST /cluster/gpu-allocate: hold GPUs for work run
// outside Corral. JobID is the caller's name for that work.
type AllocateRequest struct {
	JobID    string  `json:"job_id"`
	GPUCount int     `json:"gpu_count"`
	MemoryGB float64 `json:"memory_gb,omitempty"`
	GPUType  string  `json:"gpu_type,omitempty"`
	// Duration is how long the hold lasts once granted (a duration such
	// as "2h" or seconds; default and maximum: the server's
	// --max-interactive-time). Wait: when the GPUs are not free now, queue
	// the hold (202) instead of answering 409 (docs/interactive.md).
	Duration RawValue `json:"duration,omitempty"`
	Wait     bool     `json:"wait,omitempty"`
	// MIGProfile, GPUShareMiB, GPUCompute: hold a part of one GPU instead
	// (gpu_count 1), as a job asks for one (gpushare.go).
	GPUPart
}

// ReleaseRequest is POST /cluster/gpu-release.
type ReleaseRequest struct {
	JobID string `json:"job_id"`
}

// Hold is a set of GPUs held outside Corral's queue.
type Hold struct {
	JobID      string       `json:"job_id"`
	User       string       `json:"user,omitempty"`
	HeldAt     time.Time    `json:"held_at"`
	ReleasedAt *time.Time   `json:"released_at,omitempty"`
	Allocation []Allocation `json:"allocation"`
	// ExpiresAt is when the hold ends by itself (its duration).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Queued: the hold waits for GPUs as the interactive job JobID (its
	// name is Name); Poll is where to follow it (GET it: once running,
	// its allocation is the hold's).
	Queued bool   `json:"queued,omitempty"`
	Name   string `json:"name,omitempty"`
	Poll   string `json:"poll,omitempty"`
}

// PriorityRequest is PATCH /queue/{job_id}/priority.
type PriorityRequest struct {
	Priority RawValue `json:"priority"`
}

// OrchestratorStatus is GET /orchestrator/status (and the answer of start/stop).
type OrchestratorStatus struct {
	Running     bool       `json:"running"`
	Policy      string     `json:"policy"`
	Cycles      uint64     `json:"cycles"`
	LastCycleAt *time.Time `json:"last_cycle_at,omitempty"`
	LastCycleMS float64    `json:"last_cycle_ms"`
	QueuedJobs  int        `json:"queued_jobs"`
	RunningJobs int        `json:"running_jobs"`
	StartedAt   time.Time  `json:"started_at"`
	Version     string     `json:"version"`
	// Executors: what runs the jobs, per pool, with engines' breakers.
	Executors []ExecutorStatus `json:"executors,omitempty"`
}

// ErrorBody is every error answer: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong; Field names the offending input field.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// MaxCPUs bounds a job's CPU limit (cpus on a submission, and an agent's
// --default-cpus-per-gpu).
const MaxCPUs = 65536

// Job classes: how a job may be preempted and whether it may borrow
// Every class gets the same notice, SIGTERM, grace, SIGKILL.
const (
	ClassBatch                  = "batch"                   // the default: preemptible by policy
	ClassInteractive            = "interactive"             // never preempted; within its quotas, never borrows
	ClassInteractivePreemptible = "interactive-preemptible" // opt-in: may borrow idle GPUs, preemptible
	// ClassPreemptible is batch work that accepts being stopped at any
	// moment (spot-like): as batch, and it may also start on GPUs booked
	// ahead, to be stopped at the booking's start minus its grace
	// (docs/bookings-scheduling.md).
	ClassPreemptible = "preemptible"
)
