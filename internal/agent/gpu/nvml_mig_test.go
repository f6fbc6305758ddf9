//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

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
		0: {Mode: api.MIGEnabled, Devices: []api.MIGDevice{
			{Index: 0, UUID: "MIG-11111111-aaaa", Profile: "3g.20gb", MemoryTotal: 19968, GPUInstance: 2, ComputeInstance: 0},
			{Index: 3, UUID: "MIG-22222222-bbbb", Profile: "1g.5gb", MemoryTotal: 4864, GPUInstance: 13, ComputeInstance: 0},
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
