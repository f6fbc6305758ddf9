package orchestrator

import (
	"reflect"
	"slices"
	"testing"

	"github.com/corral-sched/corral/internal/agent/gpu"
)

func TestNVLinkDomains(t *testing.T) {
	dev := func(i int, peers ...int) gpu.Device { return gpu.Device{Index: i, NVLinkPeers: peers} }
	tests := map[string]struct {
		devs []gpu.Device
		want map[int]int
	}{
		"pairs":          {[]gpu.Device{dev(0, 1), dev(1, 0), dev(2, 3), dev(3, 2)}, map[int]int{0: 0, 1: 0, 2: 2, 3: 2}},
		"chain joins":    {[]gpu.Device{dev(0, 1), dev(1, 2), dev(2), dev(3)}, map[int]int{0: 0, 1: 0, 2: 0, 3: 3}},
		"no information": {[]gpu.Device{dev(0), dev(1)}, map[int]int{0: 0, 1: 0}},
		"unknown peer":   {[]gpu.Device{dev(0, 9), dev(1)}, map[int]int{0: 0, 1: 0}},
	}
	for name, tc := range tests {
		if got := nvlinkDomains(tc.devs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: domains = %v, want %v", name, got, tc.want)
		}
	}
}

func TestCompareNatural(t *testing.T) {
	names := []string{"gpu-10", "gpu-2", "b", "gpu-1", "a10", "a9", "n01", "n1", "gpu-2a", "gpu-"}
	slices.SortFunc(names, compareNatural)
	want := []string{"a9", "a10", "b", "gpu-", "gpu-1", "gpu-2", "gpu-2a", "gpu-10", "n01", "n1"}
	if !slices.Equal(names, want) {
		t.Fatalf("sorted %v, want %v", names, want)
	}
}
