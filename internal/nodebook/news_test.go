package nodebook

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestBookApply(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	note := func(s string) *string { return &s }
	reg := api.AgentRegistration{NodeID: "n1", AgentID: "a", GPUs: []api.AgentGPU{{Index: 0}}}
	up := func(b *Book) { b.Register(reg, "", t0, time.Minute) }
	down := func(b *Book) { up(b); b.Silent("n1") }
	full := func(b *Book) { up(b); b.Get("n1").SetDiskFull("97% used") }
	for _, tc := range []struct {
		name     string
		prepare  func(b *Book)
		ev       News
		want     Change
		down     bool   // the node's state after
		diskFull string // its disk note after
	}{
		{"unknown node's report", func(*Book) {}, News{Node: "n1", At: t0}, Unchanged, false, ""},
		{"unknown node's silence", func(*Book) {}, News{Node: "n1", Down: true}, Unchanged, false, ""},
		{"unknown node's disk", func(*Book) {}, News{Node: "n1", Disk: note("full")}, Unchanged, false, ""},
		{"up node reports", up, News{Node: "n1", At: t0.Add(time.Second)}, Reported, false, ""},
		{"up node silent", up, News{Node: "n1", Down: true}, WentDown, true, ""},
		{"down node silent", down, News{Node: "n1", Down: true}, Unchanged, true, ""},
		{"down node reports", down, News{Node: "n1", At: t0.Add(time.Second)}, CameBack, false, ""},
		{"disk fills", up, News{Node: "n1", Disk: note("97% used")}, DiskFilled, false, "97% used"},
		{"disk as it was", full, News{Node: "n1", Disk: note("97% used")}, Unchanged, false, "97% used"},
		{"disk said otherwise", full, News{Node: "n1", Disk: note("98% used")}, DiskReworded, false, "98% used"},
		{"disk has room", full, News{Node: "n1", Disk: note("")}, DiskHasRoom, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Book
			tc.prepare(&b)
			n, c := b.Apply(tc.ev)
			if c != tc.want {
				t.Errorf("change %v, want %v", c, tc.want)
			}
			if n != b.Get("n1") {
				t.Errorf("node %p, want the book's %p", n, b.Get("n1"))
			}
			if n == nil {
				return
			}
			if n.IsDown() != tc.down || n.DiskFull() != tc.diskFull {
				t.Errorf("after: down %v disk %q, want down %v disk %q", n.IsDown(), n.DiskFull(), tc.down, tc.diskFull)
			}
			if c == Reported || c == CameBack {
				if n.LastSeen() != tc.ev.At {
					t.Errorf("last seen %v, want the report's %v", n.LastSeen(), tc.ev.At)
				}
			}
		})
	}
}
