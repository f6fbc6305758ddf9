package gpubook

import (
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/nodebook"
)

func TestIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rule := nodebook.IdleRule{Threshold: 5, Window: time.Minute}
	on := func(gpus ...int) []api.Allocation {
		var as []api.Allocation
		for _, g := range gpus {
			as = append(as, api.Allocation{NodeID: "n1", GPUID: g})
		}
		return as
	}
	quietSince := func(d time.Duration) *time.Time { t := t0.Add(-d); return &t }
	for _, tc := range []struct {
		name      string
		job       api.Job
		idle      bool // reported as idle now
		busyAgain bool
		flag      bool // the job's Idle mark after
		since     bool // the start of its quiet kept
	}{
		{"quiet for the window", api.Job{State: api.StateRunning, Allocation: on(0), IdleSince: quietSince(2 * time.Minute)}, true, false, true, true},
		{"quiet, the window not over", api.Job{State: api.StateRunning, Allocation: on(0), IdleSince: quietSince(time.Second)}, false, false, false, true},
		{"quiet begins", api.Job{State: api.StateRunning, Allocation: on(0)}, false, false, false, true},
		{"idle, works again", api.Job{State: api.StateRunning, Allocation: on(1), Idle: true, IdleSince: quietSince(time.Hour)}, false, true, false, false},
		{"one GPU of two works", api.Job{State: api.StateRunning, Allocation: on(0, 1), IdleSince: quietSince(time.Hour)}, false, false, false, false},
		{"still starting: left alone", api.Job{State: api.StateAllocating, Allocation: on(0), IdleSince: quietSince(time.Hour)}, false, false, false, true},
		{"on another node", api.Job{State: api.StateRunning, Allocation: []api.Allocation{{NodeID: "n2"}}, IdleSince: quietSince(time.Hour)}, false, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			n := b.Nodes().Add(nodebook.Node{ID: "n1", Devices: []gpuinfo.Device{{Index: 0}, {Index: 1}}})
			n.Seen(t0, []api.GPUReading{{Index: 0, Utilization: 1}, {Index: 1, Utilization: 90}}, nil)
			j := tc.job
			idle, busy := Idle(rule, n, slices.Values([]*api.Job{&j}), t0)
			if (len(idle) == 1) != tc.idle || (len(busy) == 1) != tc.busyAgain {
				t.Errorf("idle %d busy again %d, want %v %v", len(idle), len(busy), tc.idle, tc.busyAgain)
			}
			if j.Idle != tc.flag || (j.IdleSince != nil) != tc.since {
				t.Errorf("marks: idle %v since %v, want %v, since kept %v", j.Idle, j.IdleSince, tc.flag, tc.since)
			}
		})
	}
}
