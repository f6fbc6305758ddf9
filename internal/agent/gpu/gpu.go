// Package gpu discovers a node's GPUs and reads their telemetry: through NVML
// (github.com/NVIDIA/go-nvml, loaded at run time so the binary runs where
// there is no driver) or, when asked, simulated devices that are marked as
// such everywhere they appear.
package gpu

import (
	"context"

	"github.com/corral-sched/corral/internal/gpuinfo"
)

// Device, Telemetry and Source are the control plane's types
// (internal/gpuinfo), named here too so that the agent's code reads as
// before.
type (
	Device    = gpuinfo.Device
	Telemetry = gpuinfo.Telemetry
	Source    = gpuinfo.Source
)

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
