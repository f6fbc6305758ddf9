package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"sync"
)

// simulated is a Source of made-up GPUs. Safe for concurrent use.
type simulated struct {
	devices []Device

	mu      sync.Mutex
	busy    map[int]bool // GPUs a job holds: they read as working
	foreign string       // a JSON file of made-up foreign processes (see SetForeignFile)
	faults  string       // a JSON file of made-up faults (see SetFaultsFile)
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
	var layout map[int][]string
	if spec.MIG != "" {
		// NewSimulated takes a spec ParseSimulateSpec made; one it did not
		// (a bad layout) gets no MIG state.
		layout, _ = parseSimMIG(spec.MIG, n, spec.MemoryGB)
	}
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
			Minor:       i,
			UUID:        fmt.Sprintf("GPU-sim-%s-%d", nodeID, i),
			Model:       spec.Model,
			MemoryMiB:   int64(math.Round(spec.MemoryGB * 1024)),
			PCIBusID:    fmt.Sprintf("00000000:%02X:00.0", 0x18+i),
			NVLinkPeers: peers,
			Simulated:   true,
		}
		if layout != nil {
			devs[i].MIG = simMIG(nodeID, i, layout[i], devs[i].MemoryMiB)
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
		if d.MIG != nil {
			m := *d.MIG
			m.Devices = slices.Clone(m.Devices)
			d.MIG = &m
		}
		out[i] = d
	}
	return out, nil
}

// Telemetry returns plausible readings: a GPU a job holds (see SetBusy)
// reads 85-97% utilized with most of its memory in use and 60-70 degrees; a
// free one reads idle at 30-35 degrees.
func (s *simulated) Telemetry(ctx context.Context) ([]Telemetry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Telemetry, len(s.devices))
	for i, d := range s.devices {
		temp := 30 + d.Index%6
		t := Telemetry{Index: d.Index, Temperature: &temp}
		if s.busy[d.Index] {
			temp = 60 + (d.Index*7)%11
			t.Utilization = 85 + (d.Index*5)%13
			t.MemoryUsedMiB = d.MemoryMiB * 3 / 4
		}
		out[i] = t
	}
	s.applyFaults(out)
	return out, nil
}

// Fault is a made-up GPU fault (SetFaultsFile): a temperature and an
// uncorrected ECC error count that the GPU's readings report.
type Fault struct {
	GPU         int   `json:"gpu"`
	Temperature *int  `json:"temperature,omitempty"`
	ECCErrors   int64 `json:"ecc_errors,omitempty"`
}

// SetFaultsFile names a JSON file ([{"gpu":0,"temperature":95,"ecc_errors":2}])
// read at each reading: the GPUs it names report those values, so that
// admin alerts (over temperature, ECC errors) can be shown and tested
// without a failing GPU. A missing or unreadable file means no fault.
func (s *simulated) SetFaultsFile(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = path
}

// applyFaults overlays the faults file on readings. Lock held.
func (s *simulated) applyFaults(out []Telemetry) {
	if s.faults == "" {
		return
	}
	b, err := os.ReadFile(s.faults)
	if err != nil {
		return
	}
	var fs []Fault
	if json.Unmarshal(b, &fs) != nil {
		return
	}
	for _, f := range fs {
		if f.GPU < 0 || f.GPU >= len(out) {
			continue
		}
		if f.Temperature != nil {
			t := *f.Temperature
			out[f.GPU].Temperature = &t
		}
		out[f.GPU].ECCErrors = f.ECCErrors
	}
}

// SetBusy says which GPUs jobs hold, so that the readings follow them.
func (s *simulated) SetBusy(indexes map[int]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = indexes
}

// SetForeignFile names a JSON file ([{"gpu":0,"pid":123,"user":"x"}]) whose
// processes the source reports as foreign: a test hook for what NVML shows
// on real GPUs. A missing file means none.
func (s *simulated) SetForeignFile(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foreign = path
}

// ForeignProcesses returns the processes listed in the foreign file.
func (s *simulated) ForeignProcesses(ctx context.Context) ([]Process, error) {
	s.mu.Lock()
	path := s.foreign
	s.mu.Unlock()
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ps []Process
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, fmt.Errorf("simulated foreign processes %s: %w", path, err)
	}
	return ps, nil
}

// Close does nothing: simulated GPUs hold no resources.
func (s *simulated) Close() error { return nil }
