//go:build cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/corral-sched/corral/internal/api"
)

// nvmlSource reads GPUs through NVML. NVML itself is thread-safe; mu is
// held for reading during queries so that Close waits for them.
type nvmlSource struct {
	lib    nvml.Interface
	mu     sync.RWMutex
	closed bool
}

func openNVML() (Source, error) {
	lib := nvml.New()
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return &nvmlSource{lib: lib}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("%w: libnvidia-ml.so not found (no NVIDIA driver?)", ErrNoNVML)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: NVIDIA driver not loaded: %w", ErrNoNVML, ret)
	default:
		return nil, fmt.Errorf("NVML init: %w", ret)
	}
}

var errClosed = errors.New("gpu: NVML source is closed")

// begin checks that ctx is not done and the source is open, and holds it
// open until the returned end is called.
func (s *nvmlSource) begin(ctx context.Context) (end func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	return s.mu.RUnlock, nil
}

// handles returns a handle per GPU index; a GPU NVML cannot open (lost,
// for instance) is left out.
// open begins a call (begin) and lists the GPUs' indices and handles
// (handles); end must be called once the handles are no longer used.
func (s *nvmlSource) open(ctx context.Context) (end func(), idx []int, handles []nvml.Device, err error) {
	if end, err = s.begin(ctx); err != nil {
		return nil, nil, nil, err
	}
	if idx, handles, err = s.handles(); err != nil {
		end()
		return nil, nil, nil, err
	}
	return end, idx, handles, nil
}

func (s *nvmlSource) handles() ([]int, []nvml.Device, error) {
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("NVML device count: %w", ret)
	}
	idx := make([]int, 0, n)
	devs := make([]nvml.Device, 0, n)
	for i := range n {
		d, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		idx = append(idx, i)
		devs = append(devs, d)
	}
	return idx, devs, nil
}

// Devices lists the GPUs. Optional fields a GPU cannot report stay empty.
func (s *nvmlSource) Devices(ctx context.Context) ([]Device, error) {
	end, idx, handles, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	out := make([]Device, len(handles))
	byBus := make(map[string]int, len(handles))
	for k, h := range handles {
		d := Device{Index: idx[k], Minor: idx[k]}
		if minor, ret := h.GetMinorNumber(); ret == nvml.SUCCESS {
			d.Minor = minor
		}
		if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = uuid
		}
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Model = name
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryMiB = int64(mem.Total / (1 << 20))
		}
		if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			d.PCIBusID = canonicalBusID(cString(pci.BusId[:]))
			byBus[d.PCIBusID] = d.Index
		}
		d.MIG = s.mig(h)
		out[k] = d
	}
	for k, h := range handles {
		out[k].NVLinkPeers = s.nvlinkPeers(h, out[k].Index, byBus, idx, handles)
	}
	return out, nil
}

// nvlinkPeers returns the indexes of the GPUs that h reaches over NVLink:
// directly (the link's remote PCI device is a local GPU) or, where its links
// end at an NVSwitch, the GPUs NVML reports as NVLink P2P capable.
func (s *nvmlSource) nvlinkPeers(h nvml.Device, self int, byBus map[string]int, idx []int, handles []nvml.Device) []int {
	var peers []int
	viaSwitch := false
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := h.GetNvLinkState(link)
		if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue
		}
		pci, ret := h.GetNvLinkRemotePciInfo(link)
		if ret != nvml.SUCCESS {
			continue
		}
		if peer, ok := byBus[canonicalBusID(cString(pci.BusId[:]))]; ok {
			if peer != self {
				peers = append(peers, peer)
			}
			continue
		}
		if s.hasSymbol("nvmlDeviceGetNvLinkRemoteDeviceType") {
			if t, ret := h.GetNvLinkRemoteDeviceType(link); ret == nvml.SUCCESS && t == nvml.NVLINK_DEVICE_TYPE_SWITCH {
				viaSwitch = true
			}
		}
	}
	if viaSwitch && s.hasSymbol("nvmlDeviceGetP2PStatus") {
		for k, other := range handles {
			if idx[k] == self {
				continue
			}
			if st, ret := h.GetP2PStatus(other, nvml.P2P_CAPS_INDEX_NVLINK); ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
				peers = append(peers, idx[k])
			}
		}
	}
	slices.Sort(peers)
	return slices.Compact(peers)
}

// mig reads a GPU's MIG mode and, while it is on, its MIG devices; nil
// where the GPU has no MIG support (NVML answers NOT_SUPPORTED) or the
// driver predates MIG.
func (s *nvmlSource) mig(h nvml.Device) *api.MIG {
	if !s.hasSymbol("nvmlDeviceGetMigMode") {
		return nil
	}
	current, pending, ret := h.GetMigMode()
	if ret != nvml.SUCCESS {
		return nil
	}
	m := &api.MIG{Mode: migMode(current)}
	if pending != current {
		m.PendingMode = migMode(pending)
	}
	if current != nvml.DEVICE_MIG_ENABLE {
		return m
	}
	// The whole GPU's compute slices: its largest GPU instance profile's
	// (7 on an A100 or H100, 4 on an A30).
	for _, p := range []int{nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE} {
		if info, ret := h.GetGpuInstanceProfileInfo(p); ret == nvml.SUCCESS && info.SliceCount > 0 {
			m.ComputeSlices = int(info.SliceCount)
			break
		}
	}
	n, ret := h.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return m
	}
	for i := range n {
		md, ret := h.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // NOT_FOUND: no MIG device in this slot
		}
		d := api.MIGDevice{Index: i}
		if uuid, ret := md.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = uuid
		}
		if name, ret := md.GetName(); ret == nvml.SUCCESS {
			d.Profile = migProfile(name)
			d.ComputeSlices = MIGComputeSlicesOf(d.Profile)
		}
		if mem, ret := md.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryTotal = int64(mem.Total / (1 << 20))
		}
		if gi, ret := md.GetGpuInstanceId(); ret == nvml.SUCCESS {
			d.GPUInstance = gi
		}
		if ci, ret := md.GetComputeInstanceId(); ret == nvml.SUCCESS {
			d.ComputeInstance = ci
		}
		m.Devices = append(m.Devices, d)
	}
	return m
}

func migMode(mode int) string {
	if mode == nvml.DEVICE_MIG_ENABLE {
		return api.MIGEnabled
	}
	return api.MIGDisabled
}

// migProfile returns the profile in a MIG device's name, "NVIDIA H100 80GB
// HBM3 MIG 1g.10gb" -> "1g.10gb"; "" where the name has none.
func migProfile(name string) string {
	if _, p, ok := strings.Cut(name, " MIG "); ok {
		return strings.TrimSpace(p)
	}
	return ""
}

// hasSymbol reports whether the loaded NVML has a function; calling one an
// old driver lacks would abort the process.
func (s *nvmlSource) hasSymbol(name string) bool {
	return s.lib.Extensions().LookupSymbol(name) == nil
}

// Telemetry reads memory use, utilization and temperature per GPU; a field
// a GPU cannot report stays zero (nil for the temperature).
func (s *nvmlSource) Telemetry(ctx context.Context) ([]Telemetry, error) {
	end, idx, handles, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	out := make([]Telemetry, len(handles))
	for k, h := range handles {
		t := Telemetry{Index: idx[k]}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			t.MemoryUsedMiB = int64(mem.Used / (1 << 20))
		}
		if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
			t.Utilization = int(u.Gpu)
		}
		if c, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			temp := int(c)
			t.Temperature = &temp
		}
		if n, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			t.ECCErrors = int64(min(n, 1<<62))
		}
		out[k] = t
	}
	return out, nil
}

// ForeignProcesses lists the compute processes on every GPU, with their
// owners where /proc tells. The agent leaves out those of Corral's jobs.
func (s *nvmlSource) ForeignProcesses(ctx context.Context) ([]Process, error) {
	end, idx, handles, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	var out []Process
	for k, h := range handles {
		procs, ret := h.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			continue
		}
		for _, p := range procs {
			out = append(out, Process{GPU: idx[k], PID: int(p.Pid), User: processOwner(int(p.Pid)), Name: processName(int(p.Pid))})
		}
	}
	return out, nil
}

// Close shuts NVML down. Closing twice is not an error.
func (s *nvmlSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %w", ret)
	}
	return nil
}
