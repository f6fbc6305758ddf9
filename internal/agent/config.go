package agent

import (
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/agent/gpu"
)

// Config is what an Agent needs.
type Config struct {
	NodeID   string
	Hostname string
	Address  string // what other nodes use as CORRAL_MASTER_ADDR; empty: the server decides
	Labels   map[string]string
	GPUs     gpu.Source // nil: a node without GPUs
	StateDir string     // task state, for adoption after a restart
	LogDir   string     // job output: LogDir/JOB/ATTEMPT[.rankN].log
	Link     Link
	// Detach lets jobs outlive the agent: they run under shims in their
	// own sessions, and the next agent on the same StateDir adopts them
	// (standalone `corral agent`, and the in-process agent of `corral up`).
	Detach bool
	// Unfenced (with Detach) starts jobs without a fence, through one
	// shim host (shimhost.go) rather than a shim each: they run on however
	// long the agent is gone. For the in-process agent of
	// `corral up`, whose server cannot move a job elsewhere while the
	// agent is down (they are one process), so a restart, however slow,
	// finds its jobs still running.
	Unfenced bool
	// ShipLogs sends job output to the server (remote agents).
	ShipLogs bool
	// Server names the control plane (its URL) in the jobs' environment,
	// so that a later agent of this node can tell its predecessors'
	// orphans from other clusters' jobs. Standalone agents set it.
	Server   string
	Interval time.Duration // report at least this often; default 5s
	// RunAs is whose account jobs run under: RunAsUser (default: the
	// job's owner when the agent is root) or RunAsAgent (runas.go).
	RunAs string
	// RunAsFallback, when set, is the account (not root) that a root
	// agent in RunAsUser mode runs the jobs of owners without a Unix
	// account under; empty: such jobs fail to start (runas.go).
	RunAsFallback string
	// MaxLogSize is how many bytes of output an attempt's log keeps; the
	// rest is dropped behind one marker line (logcap.go). 0: no cap.
	MaxLogSize int64
	// MinFreeDisk is the free share of LogDir's disk, in percent, below
	// which the node takes no new jobs (diskfree.go). 0: no check.
	MinFreeDisk float64
	// Containment is "auto" or "" (cgroups where they can be written,
	// process groups otherwise) or "process-group" (never cgroups).
	Containment string
	// AllowDevices are character devices every job may open besides the
	// closed list (contain/devices.go): --allow-device, e.g. InfiniBand.
	AllowDevices []contain.Device
	// ProcDevices and MIGMinorsFile are where the kernel lists its device
	// majors and the NVIDIA driver its MIG capability minors; empty: the
	// real ones (contain.ProcDevices, contain.MIGMinorsFile). For tests.
	ProcDevices, MIGMinorsFile string
	// NvidiaModprobe loads nvidia-uvm where the driver is loaded but it
	// is not yet (devices.go); empty: nvidia-modprobe. For tests.
	NvidiaModprobe string
	// SharedGPUs take MPS shares (--shared-gpus; mps.go): each runs an
	// MPS control daemon (MPSControl, default nvidia-cuda-mps-control,
	// found in PATH) while shares run on it, its directories under MPSDir
	// (default: corral-mps-<hash> in the system's temporary directory).
	SharedGPUs []int
	MPSControl string
	MPSDir     string
	// DefaultMemPerGPU (MiB) and DefaultCPUsPerGPU limit a job that names
	// no mem_mib or cpus: the default times its GPUs. 0: no limit.
	DefaultMemPerGPU  int64
	DefaultCPUsPerGPU float64
	// MaxPidsPerJob caps the processes and threads alive at once in one
	// attempt's cgroup (a fork bomb ends its own job, not the node). 0:
	// no limit.
	MaxPidsPerJob int64
	// MaxPidsPerNode caps the tasks of all the node's attempts together
	// (its parent cgroup's pids.max), so that its jobs leave the rest of
	// the machine pids to fork with. 0: no limit.
	MaxPidsPerNode int64
	// JobEnvFromAgent names the agent's own environment variables that
	// jobs get (--job-env-from-agent LANG,TZ); nothing else of the
	// agent's environment reaches a job (jobenv.go).
	JobEnvFromAgent []string
	// ScratchDir holds each attempt's private $TMPDIR (jobenv.go);
	// empty: DefaultScratchDir.
	ScratchDir string
	// ContainerRuntime runs the jobs that name an image (container.go):
	// RuntimePodman (default, "") or RuntimeNone (such jobs fail to start).
	ContainerRuntime string
	// Login is the node's login socket (login.go); zero: none.
	Login LoginSocketConfig
	// Shim is the command that runs `corral shim`; default: this binary.
	Shim   []string
	Logger *slog.Logger
}
