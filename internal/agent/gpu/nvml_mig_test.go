//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/corral-sched/corral/internal/api"
)

// migDevice is a MIG device handle as NVML gives it for one slot of its GPU.
func migDevice(uuid, name string, memMiB uint64, gi, ci int) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc:              func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: memMiB << 20}, nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, nvml.SUCCESS },
	}
}

// TestDevicesListMIG reads a mock DGX A100 (go-nvml's own) through the NVML
// source: a GPU with MIG on lists the MIG devices in its occupied slots, one
// with MIG off says so, one waiting for a reset tells the pending mode, and
// one without MIG support has no MIG state at all.
func TestDevicesListMIG(t *testing.T) {
	server := dgxa100.New()
	for _, d := range server.Devices {
		d.(*dgxa100.Device).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
		}
	}
	on := server.Devices[0].(*dgxa100.Device)
	on.MigMode = nvml.DEVICE_MIG_ENABLE
	slots := map[int]*mock.Device{
		0: migDevice("MIG-11111111-aaaa", "NVIDIA A100-SXM4-40GB MIG 3g.20gb", 19968, 2, 0),
		3: migDevice("MIG-22222222-bbbb", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", 4864, 13, 0),
	}
	on.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	on.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if d, ok := slots[i]; ok {
			return d, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	pending := server.Devices[2].(*dgxa100.Device)
	pending.GetMigModeFunc = func() (int, int, nvml.Return) {
		return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
	}
	unsupported := server.Devices[3].(*dgxa100.Device)
	unsupported.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }

	src := &nvmlSource{lib: server}
	devs, err := src.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	want := map[int]*api.MIG{
		0: {Mode: api.MIGEnabled, ComputeSlices: 7, Devices: []api.MIGDevice{
			{Index: 0, UUID: "MIG-11111111-aaaa", Profile: "3g.20gb", MemoryTotal: 19968, GPUInstance: 2, ComputeInstance: 0, ComputeSlices: 3},
			{Index: 3, UUID: "MIG-22222222-bbbb", Profile: "1g.5gb", MemoryTotal: 4864, GPUInstance: 13, ComputeInstance: 0, ComputeSlices: 1},
		}},
		1: {Mode: api.MIGDisabled},
		2: {Mode: api.MIGDisabled, PendingMode: api.MIGEnabled},
		3: nil,
	}
	for i, w := range want {
		if got := devs[i].MIG; !reflect.DeepEqual(got, w) {
			t.Errorf("GPU %d: MIG = %s, want %s", i, show(got), show(w))
		}
	}
	if devs[0].Model != "Mock NVIDIA A100-SXM4-40GB" || devs[0].MemoryMiB != 40960 {
		t.Errorf("GPU 0 = %+v; MIG must not change what the whole GPU reports", devs[0])
	}
}

func show(m *api.MIG) string {
	if m == nil {
		return "nil"
	}
	return fmt.Sprintf("%+v", *m)
}

func TestMIGProfile(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb":    "1g.10gb",
		"NVIDIA A100-SXM4-40GB MIG 7g.40gb":    "7g.40gb",
		"NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb": "1c.3g.40gb",
		"NVIDIA H100 80GB HBM3":                "",
	} {
		if got := migProfile(name); got != want {
			t.Errorf("migProfile(%q) = %q, want %q", name, got, want)
		}
	}
}

// h100Layout partitions a GPU of go-nvml's mock DGX H100 through the
// mock's own MIG calls (a GPU instance and a full compute instance per
// profile, in order) and gives it NVML's MIG device handles for them, as
// the driver does (the mock has no GetMigDeviceHandleByIndex of its own).
func h100Layout(t *testing.T, d *server.Device, profiles []int) {
	t.Helper()
	if ret, _ := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatalf("SetMigMode: %v", ret)
	}
	ciProfile := map[uint32]int{1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
		3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE}
	var slots []*mock.Device
	for i, p := range profiles {
		info, ret := d.GetGpuInstanceProfileInfo(p)
		if ret != nvml.SUCCESS {
			t.Fatalf("profile %d: %v", p, ret)
		}
		gi, ret := d.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			t.Fatalf("CreateGpuInstance: %v", ret)
		}
		ciInfo, ret := gi.GetComputeInstanceProfileInfo(ciProfile[info.SliceCount], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			t.Fatalf("compute profile of %d slices: %v", info.SliceCount, ret)
		}
		ci, ret := gi.CreateComputeInstance(&ciInfo)
		if ret != nvml.SUCCESS {
			t.Fatalf("CreateComputeInstance: %v", ret)
		}
		giInfo, _ := gi.GetInfo()
		cInfo, _ := ci.GetInfo()
		name := fmt.Sprintf("NVIDIA H100 80GB HBM3 MIG %dg.%dgb", info.SliceCount, info.MemorySizeMB/1024)
		slots = append(slots, migDevice(fmt.Sprintf("MIG-%s-%d", d.UUID, i), name, info.MemorySizeMB, int(giInfo.Id), int(cInfo.Id)))
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < len(slots) {
			return slots[i], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

// TestSimulatedMIGMatchesNVML partitions go-nvml's mock DGX H100 and a
// simulated H100 node (--simulate-gpus 3:H100:80:mig=…) alike, and proves
// the agent reports the same MIG state from both: mode, the GPU's compute
// slices, and per MIG device its slot, profile, memory and compute slices
// (UUIDs and instance ids are the driver's own).
func TestSimulatedMIGMatchesNVML(t *testing.T) {
	srv := dgxh100.New()
	for _, d := range srv.Devices {
		d.(*server.Device).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
		}
	}
	h100Layout(t, srv.Devices[0].(*server.Device), []int{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE})
	h100Layout(t, srv.Devices[2].(*server.Device), []int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE})
	real, err := (&nvmlSource{lib: srv}).Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSimulateSpec("3:H100:80:mig=0:1g.10gb*2+2g.20gb,2:3g.40gb+4g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := NewSimulated("n1", spec).Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	shape := func(m *api.MIG) string {
		if m == nil {
			return "nil"
		}
		s := fmt.Sprintf("%s/%d:", m.Mode, m.ComputeSlices)
		for _, d := range m.Devices {
			s += fmt.Sprintf(" [%d %s %dMiB %d slices MIG-uuid=%v]", d.Index, d.Profile, d.MemoryTotal, d.ComputeSlices, strings.HasPrefix(d.UUID, "MIG-"))
		}
		return s
	}
	for i := range 3 {
		if r, s := shape(real[i].MIG), shape(sim[i].MIG); r != s {
			t.Errorf("GPU %d: NVML reports %s, the simulator %s", i, r, s)
		}
	}
	if got := shape(real[2].MIG); got != "enabled/7: [0 3g.40gb 40960MiB 3 slices MIG-uuid=true] [1 4g.40gb 40960MiB 4 slices MIG-uuid=true]" {
		t.Errorf("GPU 2 through NVML: %s", got)
	}
}
