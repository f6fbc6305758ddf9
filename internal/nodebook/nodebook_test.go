package nodebook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestCheckContainment(t *testing.T) {
	for _, c := range []string{"", "cgroup-v1", "cgroup-v2", "process-group"} {
		if err := CheckContainment(c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
	if err := CheckContainment("jail"); api.AsError(err) == nil || api.AsError(err).Field != "containment" {
		t.Errorf("jail: %v", err)
	}
}

func TestCheckRegistration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reg   api.AgentRegistration
		field string // "": accepted
	}{
		{"good", api.AgentRegistration{NodeID: "n1", GPUs: []api.AgentGPU{{Index: 0}, {Index: 1}}}, ""},
		{"bad name", api.AgentRegistration{NodeID: "n 1"}, "node_id"},
		{"long name", api.AgentRegistration{NodeID: string(make([]byte, 129))}, "node_id"},
		{"repeated GPU", api.AgentRegistration{NodeID: "n1", GPUs: []api.AgentGPU{{Index: 0}, {Index: 0}}}, "gpus"},
		{"GPU out of range", api.AgentRegistration{NodeID: "n1", GPUs: []api.AgentGPU{{Index: 1024}}}, "gpus"},
		{"negative memory", api.AgentRegistration{NodeID: "n1", GPUs: []api.AgentGPU{{Index: 0, MemoryMiB: -1}}}, "gpus"},
		{"containment", api.AgentRegistration{NodeID: "n1", Containment: "jail"}, "containment"},
	} {
		err := CheckRegistration(tc.reg)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (api.AsError(err) == nil || api.AsError(err).Field != tc.field):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

func TestInUse(t *testing.T) {
	if err := InUse("n1", 30*time.Second, 30*time.Second); err != nil {
		t.Errorf("silent for the TTL: %v", err)
	}
	err := InUse("n1", 10*time.Second, 30*time.Second)
	var e *api.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != "node_in_use" || e.Field != "node_id" {
		t.Errorf("heard 10s ago: %v, want 409 node_in_use", err)
	}
}

func TestAgentHash(t *testing.T) {
	if AgentHash("") != "" {
		t.Error("no id must hash to no agent")
	}
	if a, b := AgentHash("a"), AgentHash("b"); a == b || len(a) != 64 {
		t.Errorf("hashes %q, %q", a, b)
	}
}

func TestWatchLook(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tick := time.Second
	var w Watch
	for _, tc := range []struct {
		at    time.Duration // after t0
		stall time.Duration
	}{
		{0, 0},                              // the first look is never a stall
		{time.Second, 0},                    // a tick
		{3 * time.Second, 0},                // two ticks: busy, not stalled
		{10 * time.Second, 6 * time.Second}, // seven seconds: a stall of six past the loop's pace
	} {
		if got := w.Look(t0.Add(tc.at), tick); got != tc.stall {
			t.Errorf("look at +%s: stall %s, want %s", tc.at, got, tc.stall)
		}
	}
}

func TestSilentSince(t *testing.T) {
	seen, grace := time.Unix(100, 0), time.Unix(200, 0)
	if got := SilentSince(seen, grace); !got.Equal(grace) {
		t.Errorf("grace later: %v", got)
	}
	if got := SilentSince(grace, seen); !got.Equal(grace) {
		t.Errorf("report later: %v", got)
	}
}

func TestIdleRule(t *testing.T) {
	at := time.Unix(10_000, 0)
	quiet := at.Add(-10 * time.Minute)
	recent := at.Add(-time.Minute)
	alloc := []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}}
	r := IdleRule{Threshold: 5, Window: 5 * time.Minute}
	for _, tc := range []struct {
		name string
		job  api.Job
		node string
		util map[int]int
		want Idle
	}{
		{"other node", api.Job{Allocation: alloc}, "n2", map[int]int{0: 0}, IdleNone},
		{"one GPU busy", api.Job{Allocation: alloc}, "n1", map[int]int{0: 0, 1: 50}, IdleBusy},
		{"one GPU unread", api.Job{Allocation: alloc}, "n1", map[int]int{0: 0}, IdleBusy},
		{"quiet, first time", api.Job{Allocation: alloc}, "n1", map[int]int{0: 0, 1: 4}, IdleBegan},
		{"quiet, within the window", api.Job{Allocation: alloc, IdleSince: &recent}, "n1", map[int]int{0: 0, 1: 0}, IdleNone},
		{"quiet for the window", api.Job{Allocation: alloc, IdleSince: &quiet}, "n1", map[int]int{0: 0, 1: 0}, IdleNow},
		{"already idle", api.Job{Allocation: alloc, IdleSince: &quiet, Idle: true}, "n1", map[int]int{0: 0, 1: 0}, IdleNone},
	} {
		if got := r.Check(&tc.job, tc.node, tc.util, at); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestState(t *testing.T) {
	for _, tc := range []struct {
		down, cordoned, draining bool
		active                   int
		want                     string
	}{
		{false, false, false, 0, Up},
		{true, true, true, 3, Down},
		{false, true, false, 1, Cordoned},
		{false, true, true, 1, Draining},
		{false, false, true, 0, Drained},
	} {
		if got := State(tc.down, tc.cordoned, tc.draining, tc.active); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc, got, tc.want)
		}
	}
}

func TestDisk(t *testing.T) {
	long := strings.Repeat("x", MaxDiskNote+10)
	if got := DiskNote(long); len(got) != MaxDiskNote {
		t.Errorf("a long note kept %d bytes, want %d", len(got), MaxDiskNote)
	}
	if got := DiskNote("full\xff"); got != "full" {
		t.Errorf("invalid UTF-8 kept: %q", got)
	}
	for _, tc := range []struct {
		was, now string
		want     Disk
	}{
		{"", "", DiskSame},
		{"a", "a", DiskSame},
		{"", "a", DiskFull},
		{"a", "", DiskRoom},
		{"a", "b", DiskReword},
	} {
		if got := DiskChange(tc.was, tc.now); got != tc.want {
			t.Errorf("%q -> %q: %v, want %v", tc.was, tc.now, got, tc.want)
		}
	}
}

func TestRecordRegister(t *testing.T) {
	old := Record{ID: "n1", Hostname: "old", Address: "10.0.0.1", Cordoned: true, Draining: true, Down: true,
		Labels: map[string]string{"a": "b"}, GPUs: []api.AgentGPU{{Index: 0}}, Agent: AgentHash("x")}
	for _, tc := range []struct {
		name, addr, wantAddr string
		reg                  api.AgentRegistration
	}{
		{"its own address", "192.0.2.9", "10.0.0.2", api.AgentRegistration{NodeID: "n1", Address: "10.0.0.2", AgentID: "y", Hostname: "new"}},
		{"where it connected from", "192.0.2.9", "192.0.2.9", api.AgentRegistration{NodeID: "n1", AgentID: "y", Hostname: "new"}},
	} {
		labels := map[string]string{"pool": "p"}
		tc.reg.Labels = labels
		r := old.Register(tc.reg, tc.addr)
		labels["pool"] = "changed"
		switch {
		case r.Address != tc.wantAddr:
			t.Errorf("%s: address %q, want %q", tc.name, r.Address, tc.wantAddr)
		case r.Down || r.Hostname != "new" || r.Agent != AgentHash("y") || len(r.GPUs) != 0:
			t.Errorf("%s: %+v: want it up, as registered", tc.name, r)
		case !r.Cordoned || !r.Draining:
			t.Errorf("%s: cordon or drain lost", tc.name)
		case r.Labels["pool"] != "p":
			t.Errorf("%s: labels not copied", tc.name)
		}
	}
}

func TestAct(t *testing.T) {
	for _, tc := range []struct {
		action                   string
		cordoned, draining       bool
		wantCordoned, wantDrains bool
		wantErr                  bool
	}{
		{"cordon", false, false, true, false, false},
		{"drain", false, false, false, true, false},
		{"drain", true, false, true, true, false},
		{"uncordon", true, true, false, false, false},
		{"reboot", true, false, true, false, true}, // refused: unchanged
	} {
		c, d, err := Act(tc.action, tc.cordoned, tc.draining)
		if c != tc.wantCordoned || d != tc.wantDrains || (err != nil) != tc.wantErr {
			t.Errorf("%s from %v/%v: %v/%v %v", tc.action, tc.cordoned, tc.draining, c, d, err)
		}
	}
}
