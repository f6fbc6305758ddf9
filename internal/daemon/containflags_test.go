package daemon

import (
	"slices"
	"testing"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/agent/contain"
)

func TestParseNodePids(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "5000": 5000, " 24000 ": 24000, "4194304": 4194304} {
		if got, err := parseNodePids(in); err != nil || got != want {
			t.Errorf("parseNodePids(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"auto", ""} {
		if got, err := parseNodePids(in); err != nil || got < 1024 {
			t.Errorf("parseNodePids(%q) = %d, %v; want this machine's default, at least 1024", in, got, err)
		}
	}
	for _, in := range []string{"-1", "lots", "4194305", "1.5", "75%"} {
		if got, err := parseNodePids(in); err == nil {
			t.Errorf("parseNodePids(%q) = %d, want an error", in, got)
		}
	}
}

// --shared-gpus and --allow-device reach the agent's configuration, and
// bad values are usage errors.
func TestContainFlagsSharesAndDevices(t *testing.T) {
	for _, tc := range []struct {
		shared  string
		devices []string
		gpus    []int
		extra   []contain.Device
		ok      bool
	}{
		{"", nil, nil, nil, true},
		{"0, 1", []string{"231:*", "10:229"}, []int{0, 1}, []contain.Device{{Major: 231, Minor: -1}, {Major: 10, Minor: 229}}, true},
		{"0,x", nil, nil, nil, false},
		{"-1", nil, nil, nil, false},
		{"", []string{"195:3"}, nil, nil, false},
		{"", []string{"10"}, nil, nil, false},
	} {
		c := containFlags{nodePids: "0", shared: tc.shared, devices: tc.devices, mpsControl: "nvidia-cuda-mps-control"}
		var cfg agent.Config
		err := c.apply(&cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%q %v: err %v, want ok=%v", tc.shared, tc.devices, err, tc.ok)
			continue
		}
		if tc.ok && (!slices.Equal(cfg.SharedGPUs, tc.gpus) || !slices.Equal(cfg.AllowDevices, tc.extra) || cfg.MPSControl != "nvidia-cuda-mps-control") {
			t.Errorf("%q %v: shared %v devices %v, want %v %v", tc.shared, tc.devices, cfg.SharedGPUs, cfg.AllowDevices, tc.gpus, tc.extra)
		}
	}
}
