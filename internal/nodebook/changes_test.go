package nodebook

import (
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

func TestBookRegister(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := time.Minute
	reg := func(agent string) api.AgentRegistration {
		return api.AgentRegistration{NodeID: "n1", AgentID: agent, GPUs: []api.AgentGPU{{Index: 0}}}
	}
	for _, tc := range []struct {
		name     string
		prepare  func(b *Book) // the book before the registration
		agent    string
		at       time.Time
		want     Joined
		conflict bool
	}{
		{"new node", func(b *Book) {}, "a", t0, New, false},
		{"same agent again", func(b *Book) { b.Register(reg("a"), "", t0, ttl) }, "a", t0.Add(time.Second), Again, false},
		{"another agent within the TTL", func(b *Book) { b.Register(reg("a"), "", t0, ttl) }, "b", t0.Add(30 * time.Second), Again, true},
		{"another agent past the TTL", func(b *Book) { b.Register(reg("a"), "", t0, ttl) }, "b", t0.Add(2 * time.Minute), Again, false},
		{"back from down, another agent", func(b *Book) {
			b.Register(reg("a"), "", t0, ttl)
			b.Silent("n1")
		}, "b", t0.Add(time.Second), Back, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Book
			tc.prepare(&b)
			before := b.Len()
			n, joined, err := b.Register(reg(tc.agent), "10.0.0.1:5", tc.at, ttl)
			if tc.conflict {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "node_in_use" {
					t.Fatalf("err %v, want 409 node_in_use", err)
				}
				if b.Len() != before || b.Get("n1").LastSeen() != t0 {
					t.Errorf("a refused registration changed the book")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if joined != tc.want {
				t.Errorf("joined %v, want %v", joined, tc.want)
			}
			if n != b.Get("n1") || n.IsDown() || n.LastSeen() != tc.at || n.Address != "10.0.0.1:5" || len(n.Devices) != 1 {
				t.Errorf("node after registration: %+v", n)
			}
		})
	}
}

func TestBookSilentReportLost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b Book
	b.Add(Node{ID: "a"}).Seen(t0, nil, nil)
	if n, flipped := b.Silent("nope"); n != nil || flipped {
		t.Errorf("unknown node: %v %v", n, flipped)
	}
	if n, flipped := b.Silent("a"); n == nil || !flipped || !n.IsDown() {
		t.Fatalf("silence of an up node: flipped %v", flipped)
	}
	if _, flipped := b.Silent("a"); flipped {
		t.Errorf("silence of a down node flipped it again")
	}
	readings := []api.GPUReading{{Index: 0, Utilization: 30}}
	n, back := b.Report("a", t0.Add(time.Minute), readings, nil)
	if n == nil || !back || n.IsDown() || n.LastSeen() != t0.Add(time.Minute) || len(n.Samples(t0)) != 1 {
		t.Fatalf("report of a down node: back %v, node %+v", back, n)
	}
	if _, back := b.Report("a", t0, nil, nil); back || n.LastSeen() != t0.Add(time.Minute) {
		t.Errorf("an older report: back %v, last seen %v (must not move back)", back, n.LastSeen())
	}
	if n, _ := b.Report("nope", t0, nil, nil); n != nil {
		t.Errorf("report of an unknown node found %v", n.ID)
	}
	if got := b.MarkLost(t0.Add(90*time.Second), time.Minute); len(got) != 0 {
		t.Errorf("lost within the TTL: %d", len(got))
	}
	if got := b.MarkLost(t0.Add(3*time.Minute), time.Minute); len(got) != 1 || !got[0].IsDown() {
		t.Errorf("lost past the TTL: %v", got)
	}
}

func TestBookActSamples(t *testing.T) {
	var b Book
	b.Add(Node{ID: "a"})
	for _, tc := range []struct {
		node, action string
		status       int
		state        string
	}{
		{"nope", "cordon", http.StatusNotFound, ""},
		{"a", "reboot", http.StatusNotFound, Up},
		{"a", "cordon", 0, Cordoned},
		{"a", "drain", 0, Drained},
		{"a", "uncordon", 0, Up},
	} {
		n, err := b.Act(tc.node, tc.action)
		var ae *api.Error
		switch {
		case tc.status != 0 && (!errors.As(err, &ae) || ae.Status != tc.status):
			t.Errorf("%s %s: err %v, want %d", tc.node, tc.action, err, tc.status)
		case tc.status == 0 && err != nil:
			t.Errorf("%s %s: %v", tc.node, tc.action, err)
		case tc.status == 0 && n.State(func() int { return 0 }) != tc.state:
			t.Errorf("%s %s: state %s, want %s", tc.node, tc.action, n.State(func() int { return 0 }), tc.state)
		}
		if got := b.Get("a").State(func() int { return 0 }); tc.state != "" && got != tc.state {
			t.Errorf("%s %s: the book's node is %s, want %s", tc.node, tc.action, got, tc.state)
		}
	}
	if _, err := b.Samples("nope", time.Time{}); err == nil {
		t.Errorf("samples of an unknown node: no error")
	}
	if s, err := b.Samples("a", time.Time{}); err != nil || len(s) != 0 {
		t.Errorf("samples of a: %v %v", s, err)
	}
}

func TestBookRevive(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b Book
	for _, id := range []string{"gpu", "cpu", "idle", "up"} {
		b.Add(Node{ID: id})
		if id != "up" {
			b.Silent(id)
		}
	}
	jobs := []*api.Job{
		{ID: "j1", Allocation: []api.Allocation{{NodeID: "gpu", GPUID: 0}}},
		{ID: "j2", NodeID: "cpu", Allocation: []api.Allocation{}},
		{ID: "j3", Allocation: []api.Allocation{{NodeID: "up", GPUID: 0}}},
	}
	var ids []string
	for _, n := range b.Revive(jobs, now) {
		ids = append(ids, n.ID)
	}
	if !reflect.DeepEqual(ids, []string{"gpu", "cpu"}) {
		t.Errorf("revived %v, want [gpu cpu]", ids)
	}
	if !b.Get("idle").IsDown() || b.Get("gpu").SilentSince() != now {
		t.Errorf("idle must stay down; gpu's silence must count from now")
	}
}

func TestPlaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  api.Job
		want bool
	}{
		{"a GPU there", api.Job{Allocation: []api.Allocation{{NodeID: "b"}, {NodeID: "a"}}}, true},
		{"no GPUs, its node", api.Job{NodeID: "a"}, true},
		{"elsewhere", api.Job{NodeID: "b", Allocation: []api.Allocation{{NodeID: "b"}}}, false},
	} {
		if got := Placed(&tc.job, "a"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIdleApply(t *testing.T) {
	at := time.Unix(10_000, 0)
	quiet := at.Add(-10 * time.Minute)
	alloc := []api.Allocation{{NodeID: "n1", GPUID: 0}}
	r := IdleRule{Threshold: 5, Window: 5 * time.Minute}
	for _, tc := range []struct {
		name      string
		job       api.Job
		util      map[int]int
		want      Idle
		idle      bool
		idleSince *time.Time
	}{
		{"busy clears", api.Job{Allocation: alloc, Idle: true, IdleSince: &quiet}, map[int]int{0: 90}, IdleBusy, false, nil},
		{"quiet begins", api.Job{Allocation: alloc}, map[int]int{0: 0}, IdleBegan, false, &at},
		{"idle now", api.Job{Allocation: alloc, IdleSince: &quiet}, map[int]int{0: 0}, IdleNow, true, &quiet},
	} {
		j := tc.job
		if got := r.Apply(&j, "n1", tc.util, at); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if j.Idle != tc.idle || !reflect.DeepEqual(j.IdleSince, tc.idleSince) {
			t.Errorf("%s: idle %v since %v, want %v since %v", tc.name, j.Idle, j.IdleSince, tc.idle, tc.idleSince)
		}
	}
	n := Node{ID: "n1"}
	n.Seen(at, []api.GPUReading{{Index: 0, Utilization: 7}, {Index: 3, Utilization: 0}}, nil)
	if got := n.UtilByGPU(); !reflect.DeepEqual(got, map[int]int{0: 7, 3: 0}) {
		t.Errorf("util by GPU %v", got)
	}
}

func TestPlacedNodeAndOnly(t *testing.T) {
	if got := PlacedNode(nil); got != "" {
		t.Errorf("no placement: %q", got)
	}
	if got := PlacedNode([]sched.Placement{{NodeID: "a"}, {NodeID: "b"}}); got != "a" {
		t.Errorf("rank 0's node: %q, want a", got)
	}
	var b Book
	if b.Only() != "" {
		t.Errorf("no node: %q", b.Only())
	}
	b.Add(Node{ID: "a"})
	if b.Only() != "a" {
		t.Errorf("one node: %q", b.Only())
	}
	b.Add(Node{ID: "b"})
	if b.Only() != "" {
		t.Errorf("two nodes: %q", b.Only())
	}
}

func TestBookLoad(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	up := Record{ID: "up", GPUs: []api.AgentGPU{{Index: 0, MemoryMiB: 81920}}}
	down := Record{ID: "down", Down: true}
	given := Record{ID: "given", Hostname: "stored"}
	for _, tc := range []struct {
		name    string
		records map[string]string
		wantErr bool
		ids     []string // the Book's nodes after, sorted
	}{
		{"stored nodes", map[string]string{"up": up.Encode(), "down": down.Encode(), "given": given.Encode()}, false, []string{"down", "given", "up"}},
		{"a bad record", map[string]string{"bad": "{"}, true, []string{"given"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Book
			static := Node{ID: "given"}
			static.MakeStatic(t0)
			b.Add(static)
			err := b.Load(tc.records, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			var ids []string
			for _, n := range b.All() {
				ids = append(ids, n.ID)
			}
			slices.Sort(ids)
			if !reflect.DeepEqual(ids, tc.ids) {
				t.Fatalf("nodes %v, want %v", ids, tc.ids)
			}
			if g := b.Get("given"); g.Hostname == "stored" || !g.Static() {
				t.Errorf("a node given in Config was replaced by its stored record")
			}
			if tc.wantErr {
				return
			}
			if n := b.Get("up"); n.IsDown() || n.SilentSince() != now {
				t.Errorf("an up node: down %v, silent since %v; want up with a TTL from now", n.IsDown(), n.SilentSince())
			}
			if !b.Get("down").IsDown() {
				t.Errorf("a down node came back up without its agent")
			}
			if n, d := b.Device("up", 0); n == nil || d == nil || d.MemoryMiB != 81920 {
				t.Errorf("device up/0: %v %v", n, d)
			}
			if n, d := b.Device("up", 1); n != nil || d != nil {
				t.Errorf("device up/1 found")
			}
			if n, d := b.Device("nope", 0); n != nil || d != nil {
				t.Errorf("device of an unknown node found")
			}
		})
	}
}

func TestBookUtil(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b Book
	b.Add(Node{ID: "a"}).Seen(t0, []api.GPUReading{{Index: 1, Utilization: 40}}, nil)
	cases := []struct {
		name       string
		node       string
		gpu        int
		pct        int
		known, got bool
	}{
		{"a read GPU", "a", 1, 40, true, true},
		{"a GPU no report read", "a", 0, 0, true, false},
		{"an unknown node", "nope", 1, 0, false, false},
	}
	for _, c := range cases {
		pct, known, got := b.Util(c.node, c.gpu)
		if pct != c.pct || known != c.known || got != c.got {
			t.Errorf("%s: Util = %d %v %v, want %d %v %v", c.name, pct, known, got, c.pct, c.known, c.got)
		}
	}
}
