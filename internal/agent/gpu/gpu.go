// Package gpu discovers a node's GPUs and reads their telemetry: through NVML
// (github.com/NVIDIA/go-nvml, loaded at run time so the binary runs where
// there is no driver) or, when asked, simulated devices that are marked as
// such everywhere they appear.
package gpu

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
)

// Device is one GPU as discovered.
type Device struct {
	Index       int
	UUID        string
	Model       string // e.g. "NVIDIA H100 80GB HBM3"
	MemoryMiB   int64
	PCIBusID    string
	Minor       int   // its device node's minor number (/dev/nvidiaN is 195:N); simulated: the index
	NVLinkPeers []int // indexes of GPUs on this node reachable over NVLink
	Simulated   bool
	MIG         *api.MIG // MIG mode and devices; nil where the GPU has no MIG support
}

// Telemetry is a live reading of one GPU.
type Telemetry struct {
	Index         int
	MemoryUsedMiB int64
	Utilization   int   // percent
	Temperature   *int  // degrees Celsius; nil when unknown
	ECCErrors     int64 // uncorrected ECC errors since the driver loaded (volatile); 0: none or unknown
}

// Source discovers GPUs and reads their telemetry.
type Source interface {
	// Devices returns the node's GPUs in index order.
	Devices(ctx context.Context) ([]Device, error)
	// Telemetry returns a reading per GPU, in index order.
	Telemetry(ctx context.Context) ([]Telemetry, error)
	// Close releases the source (NVML shutdown).
	Close() error
}

// Process is a compute process running on a GPU.
type Process struct {
	GPU  int    `json:"gpu"`
	PID  int    `json:"pid"`
	User string `json:"user,omitempty"`
	Name string `json:"name,omitempty"`
}

// ProcessLister is a Source that can list the compute processes on its
// GPUs (NVML can; simulated GPUs read them from a file).
type ProcessLister interface {
	ForeignProcesses(ctx context.Context) ([]Process, error)
}

// BusyTracker is a Source whose readings follow which GPUs jobs hold
// (simulated GPUs).
type BusyTracker interface {
	SetBusy(indexes map[int]bool)
}
