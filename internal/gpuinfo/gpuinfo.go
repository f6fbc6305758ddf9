// Package gpuinfo holds what the control plane knows of a node's GPUs: a
// device as discovered, a live reading, and the Source interface that
// yields both. It has no NVML in it: internal/agent/gpu implements Source
// on the nodes (NVML, or simulated devices), and the orchestrator and
// server use these types without linking the agent's discovery code.
package gpuinfo

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
	Shared      bool     // the node runs MPS shares on it (corral agent --shared-gpus)
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
