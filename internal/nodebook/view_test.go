package nodebook

import (
	"reflect"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/jobspec"
)

func TestNVLinkDomains(t *testing.T) {
	dev := func(i int, peers ...int) gpuinfo.Device { return gpuinfo.Device{Index: i, NVLinkPeers: peers} }
	tests := map[string]struct {
		devs []gpuinfo.Device
		want map[int]int
	}{
		"pairs":          {[]gpuinfo.Device{dev(0, 1), dev(1, 0), dev(2, 3), dev(3, 2)}, map[int]int{0: 0, 1: 0, 2: 2, 3: 2}},
		"chain joins":    {[]gpuinfo.Device{dev(0, 1), dev(1, 2), dev(2), dev(3)}, map[int]int{0: 0, 1: 0, 2: 0, 3: 3}},
		"no information": {[]gpuinfo.Device{dev(0), dev(1)}, map[int]int{0: 0, 1: 0}},
		"unknown peer":   {[]gpuinfo.Device{dev(0, 9), dev(1)}, map[int]int{0: 0, 1: 0}},
	}
	for name, tc := range tests {
		if got := NVLinkDomains(tc.devs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: domains = %v, want %v", name, got, tc.want)
		}
	}
}

func TestNodeSeenAndState(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := FromRecord(Record{ID: "n1", GPUs: []api.AgentGPU{{Index: 0}, {Index: 1}}})
	n.Seen(t0.Add(time.Minute), []api.GPUReading{{Index: 1, Utilization: 40}}, []api.ForeignProcess{{GPU: 0}})
	n.Seen(t0, nil, nil) // late news: the last sight stays, no sample
	if !n.LastSeen().Equal(t0.Add(time.Minute)) {
		t.Errorf("last seen %v, want %v", n.LastSeen(), t0.Add(time.Minute))
	}
	if u, ok := n.Util(1); !ok || u != 40 {
		t.Errorf("util of GPU 1 = %d, %v; want 40, true", u, ok)
	}
	if got := len(n.Samples(t0)); got != 1 {
		t.Errorf("%d samples, want 1", got)
	}
	if n.Pool() != api.PoolAgents || n.ContainmentShown() != api.ContainProcessGroup {
		t.Errorf("pool %q, containment %q", n.Pool(), n.ContainmentShown())
	}
	tests := []struct {
		action string
		active int
		down   bool
		want   string
		sched  bool
	}{
		{"uncordon", 0, false, Up, true},
		{"cordon", 0, false, Cordoned, false},
		{"drain", 2, false, Draining, false},
		{"drain", 0, false, Drained, false},
		{"uncordon", 0, true, Down, false},
	}
	for _, tc := range tests {
		if err := n.Act("uncordon"); err != nil {
			t.Fatal(err)
		}
		if err := n.Act(tc.action); err != nil {
			t.Fatal(err)
		}
		if tc.down {
			n.MarkDown()
		}
		if got := n.State(func() int { return tc.active }); got != tc.want || n.Schedulable() != tc.sched {
			t.Errorf("%s, %d active, down %v: state %q schedulable %v; want %q %v", tc.action, tc.active, tc.down, got, n.Schedulable(), tc.want, tc.sched)
		}
		n.MarkUp(time.Time{})
	}
	if err := n.Act("explode"); err == nil {
		t.Error("an unknown action was taken")
	}
}

func TestBookLostAndAttend(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b Book
	static := Node{ID: "s"}
	static.MakeStatic(t0)
	b.Add(static)
	b.Add(Node{ID: "a"}).Seen(t0, nil, nil)
	b.Add(Node{ID: "b"}).Seen(t0.Add(50*time.Second), nil, nil)
	if got := b.Get("a").Labels[jobspec.PoolLabel]; got != api.PoolAgents {
		t.Errorf("pool label %q, want %q", got, api.PoolAgents)
	}
	lostIDs := func(now time.Time) []string {
		var ids []string
		for _, n := range b.Lost(now, time.Minute) {
			ids = append(ids, n.ID)
		}
		return ids
	}
	if got := lostIDs(t0.Add(90 * time.Second)); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("lost %v, want [a] (a static node never times out)", got)
	}
	// A stall of 10 minutes between two looks is forgiven to a and b.
	tick := time.Second
	if stall, _ := b.Attend(t0, tick); stall != 0 {
		t.Errorf("first look: stall %v", stall)
	}
	stall, n := b.Attend(t0.Add(10*time.Minute), tick)
	if stall != 10*time.Minute-tick || n != 2 {
		t.Errorf("stall %v over %d nodes, want %v over 2", stall, n, 10*time.Minute-tick)
	}
	if got := lostIDs(t0.Add(90 * time.Second).Add(stall)); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("after the stall, lost %v; want [a] only", got)
	}
	if got := lostIDs(t0.Add(60 * time.Second).Add(stall)); got != nil {
		t.Errorf("within the TTL after the stall, lost %v", got)
	}
}
