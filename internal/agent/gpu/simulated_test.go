package gpu

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestSimulatedDevices(t *testing.T) {
	ctx := context.Background()
	src := NewSimulated("node-a", SimSpec{Count: 4, Model: "A100", MemoryGB: 40})
	defer src.Close()

	devs, err := src.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 4 {
		t.Fatalf("got %d devices, want 4", len(devs))
	}
	seen := map[string]bool{}
	for i, d := range devs {
		if d.Index != i {
			t.Errorf("device %d: Index %d", i, d.Index)
		}
		if want := fmt.Sprintf("GPU-sim-node-a-%d", i); d.UUID != want {
			t.Errorf("device %d: UUID %q, want %q", i, d.UUID, want)
		}
		if seen[d.UUID] || seen[d.PCIBusID] {
			t.Errorf("device %d: duplicate UUID or bus id", i)
		}
		seen[d.UUID], seen[d.PCIBusID] = true, true
		if d.Model != "A100" || d.MemoryMiB != 40*1024 || !d.Simulated {
			t.Errorf("device %d: %+v", i, d)
		}
		var want []int
		for j := range 4 {
			if j != i {
				want = append(want, j)
			}
		}
		if !slices.Equal(d.NVLinkPeers, want) {
			t.Errorf("device %d: NVLinkPeers %v, want %v", i, d.NVLinkPeers, want)
		}
	}

	// Callers may change what they get without changing the source.
	devs[0].NVLinkPeers[0] = 99
	again, _ := src.Devices(ctx)
	if again[0].NVLinkPeers[0] != 1 {
		t.Error("Devices returned shared NVLinkPeers slices")
	}

	// Deterministic: another source for the same node has the same UUIDs.
	other, _ := NewSimulated("node-a", SimSpec{Count: 4, Model: "A100", MemoryGB: 40}).Devices(ctx)
	for i := range other {
		if other[i].UUID != again[i].UUID {
			t.Errorf("UUID %d not deterministic", i)
		}
	}
}

func TestSimulatedDefaults(t *testing.T) {
	devs, err := NewSimulated("n", SimSpec{Count: 1}).Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := devs[0]; d.Model != "H100" || d.MemoryMiB != 80*1024 || len(d.NVLinkPeers) != 0 {
		t.Errorf("defaults: %+v", d)
	}
}

func TestSimulatedTelemetry(t *testing.T) {
	src := NewSimulated("n", SimSpec{Count: 8, Model: "H100", MemoryGB: 80})
	tel, err := src.Telemetry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tel) != 8 {
		t.Fatalf("got %d readings, want 8", len(tel))
	}
	for i, r := range tel {
		if r.Index != i || r.MemoryUsedMiB != 0 || r.Utilization != 0 {
			t.Errorf("reading %d: %+v", i, r)
		}
		if r.Temperature == nil || *r.Temperature < 30 || *r.Temperature > 35 {
			t.Errorf("reading %d: temperature %v, want 30..35", i, r.Temperature)
		}
	}
}

func TestSimulatedCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := NewSimulated("n", SimSpec{Count: 2})
	if _, err := src.Devices(ctx); err == nil {
		t.Error("Devices: no error for a canceled context")
	}
	if _, err := src.Telemetry(ctx); err == nil {
		t.Error("Telemetry: no error for a canceled context")
	}
}

func TestSimulatedConcurrent(t *testing.T) {
	src := NewSimulated("n", SimSpec{Count: 8})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := src.Devices(context.Background()); err != nil {
					t.Error(err)
				}
				if _, err := src.Telemetry(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestSimulatedTopologies(t *testing.T) {
	for topo, want := range map[string][][]int{
		"pairs": {{1}, {0}, {3}, {2}},
		"none":  {{}, {}, {}, {}},
		"quads": {{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}},
	} {
		devs, err := NewSimulated("n", SimSpec{Count: 4, Model: "H100", MemoryGB: 80, Topology: topo}).Devices(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range devs {
			if !slices.Equal(d.NVLinkPeers, want[i]) && !(len(d.NVLinkPeers) == 0 && len(want[i]) == 0) {
				t.Errorf("%s: device %d peers %v, want %v", topo, i, d.NVLinkPeers, want[i])
			}
		}
	}
}

// A simulated MIG layout is reported as NVML reports a real one: the GPUs
// it names have MIG on and list one MIG device per profile, in slot order,
// with its memory (its eighths of the GPU's), compute slices, GPU and
// compute instance and a MIG- UUID of its own; the others have MIG off.
func TestSimulatedMIGLayout(t *testing.T) {
	spec, err := ParseSimulateSpec("3:H100:80:mig=0:1g.10gb*2+2g.20gb,2:3g.40gb+4g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	src := NewSimulated("n1", spec)
	devs, err := src.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []*api.MIG{
		{Mode: api.MIGEnabled, ComputeSlices: 7, Devices: []api.MIGDevice{
			{Index: 0, UUID: "MIG-sim-n1-0-0", Profile: "1g.10gb", MemoryTotal: 10240, GPUInstance: 1, ComputeSlices: 1},
			{Index: 1, UUID: "MIG-sim-n1-0-1", Profile: "1g.10gb", MemoryTotal: 10240, GPUInstance: 2, ComputeSlices: 1},
			{Index: 2, UUID: "MIG-sim-n1-0-2", Profile: "2g.20gb", MemoryTotal: 20480, GPUInstance: 3, ComputeSlices: 2},
		}},
		{Mode: api.MIGDisabled},
		{Mode: api.MIGEnabled, ComputeSlices: 7, Devices: []api.MIGDevice{
			{Index: 0, UUID: "MIG-sim-n1-2-0", Profile: "3g.40gb", MemoryTotal: 40960, GPUInstance: 1, ComputeSlices: 3},
			{Index: 1, UUID: "MIG-sim-n1-2-1", Profile: "4g.40gb", MemoryTotal: 40960, GPUInstance: 2, ComputeSlices: 4},
		}},
	}
	for i, w := range want {
		if !reflect.DeepEqual(devs[i].MIG, w) {
			t.Errorf("GPU %d: MIG %+v, want %+v", i, devs[i].MIG, w)
		}
	}
	// The caller's copy is its own.
	devs[0].MIG.Devices[0].UUID = "changed"
	again, _ := src.Devices(context.Background())
	if again[0].MIG.Devices[0].UUID != "MIG-sim-n1-0-0" {
		t.Error("Devices shares its MIG devices with the caller")
	}
	plain, _ := NewSimulated("n1", SimSpec{Count: 1}).Devices(context.Background())
	if plain[0].MIG != nil {
		t.Errorf("without a layout, simulated GPUs have no MIG state: %+v", plain[0].MIG)
	}
}
