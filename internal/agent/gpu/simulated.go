package gpu

import (
	"context"
	"fmt"
	"math"
)

// simulated is a Source of made-up GPUs. Its data never changes after
// construction, so it is safe for concurrent use.
type simulated struct {
	devices []Device
}

// NewSimulated returns a Source of spec.Count simulated GPUs for node nodeID:
// each has Simulated set, the UUID "GPU-sim-<nodeID>-<index>", Model
// spec.Model and spec.MemoryGB of memory; all are NVLink peers of one
// another, like the GPUs of one HGX board. An empty Model or a MemoryGB
// below 1 take the defaults ("H100", 80 GB); a Count below 0 counts as 0.
func NewSimulated(nodeID string, spec SimSpec) Source {
	if spec.Model == "" {
		spec.Model = DefaultSimModel
	}
	if spec.MemoryGB < 1 || math.IsNaN(spec.MemoryGB) {
		spec.MemoryGB = DefaultSimMemoryGB
	}
	n := max(spec.Count, 0)
	devs := make([]Device, n)
	group := topologies[spec.Topology]
	if group <= 0 {
		group = max(n, 1)
	}
	for i := range devs {
		peers := make([]int, 0, group-1)
		for j := range n {
			if j != i && j/group == i/group {
				peers = append(peers, j)
			}
		}
		devs[i] = Device{
			Index:       i,
			UUID:        fmt.Sprintf("GPU-sim-%s-%d", nodeID, i),
			Model:       spec.Model,
			MemoryMiB:   int64(math.Round(spec.MemoryGB * 1024)),
			PCIBusID:    fmt.Sprintf("00000000:%02X:00.0", 0x18+i),
			NVLinkPeers: peers,
			Simulated:   true,
		}
	}
	return &simulated{devices: devs}
}

// Devices returns the simulated GPUs in index order.
func (s *simulated) Devices(ctx context.Context) ([]Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]Device, len(s.devices))
	for i, d := range s.devices {
		d.NVLinkPeers = append([]int(nil), d.NVLinkPeers...)
		out[i] = d
	}
	return out, nil
}

// Telemetry returns idle readings: no memory used, 0% utilization and a
// steady temperature of 30-35 degrees Celsius.
func (s *simulated) Telemetry(ctx context.Context) ([]Telemetry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]Telemetry, len(s.devices))
	for i, d := range s.devices {
		temp := 30 + d.Index%6
		out[i] = Telemetry{Index: d.Index, Temperature: &temp}
	}
	return out, nil
}

// Close does nothing: simulated GPUs hold no resources.
func (s *simulated) Close() error { return nil }
