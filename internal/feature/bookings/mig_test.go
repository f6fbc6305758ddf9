package bookings

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/holds"
)

// TestBookingSkipsMIG: a booking of whole GPUs never takes a GPU in MIG
// mode (its slices are placed as units); a GPU with MIG off counts.
func TestBookingSkipsMIG(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	n := node("n1", "H100", 4)
	n.Devices[0].MIG = &api.MIG{Mode: api.MIGEnabled, Devices: []api.MIGDevice{{Index: 0, Profile: "7g.80gb"}}}
	n.Devices[1].MIG = &api.MIG{Mode: api.MIGEnabled, Devices: []api.MIGDevice{{Index: 0, Profile: "3g.40gb"}}}
	n.Devices[2].MIG = &api.MIG{Mode: api.MIGDisabled}
	b := newBooks(newCluster(n), &now, Config{Allowance: 64})
	admin := Booker{User: "root", Admin: true}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	r, _, err := create(b, now, req("two", 2, base, 9*time.Hour, 10*time.Hour), admin)
	if err != nil || holds.GPUs(r.Allocation) != "GPUs 2-3 on n1" {
		t.Fatalf("booked %s (%v), want GPUs 2-3 on n1", holds.GPUs(r.Allocation), err)
	}
	if _, _, err := create(b, now, req("three", 3, base, 11*time.Hour, 12*time.Hour), admin); err == nil {
		t.Fatal("booked 3 whole GPUs of a node with 2 not in MIG mode")
	}
}

// TestBookingSkipsDownNodes: a booking that names no node never takes
// the GPUs of a node that is down; one that names it may.
func TestBookingSkipsDownNodes(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	c := newCluster(node("n1", "H100", 2), node("n2", "H100", 2))
	c.nodes.Get("n1").MarkDown()
	b := newBooks(c, &now, Config{Allowance: 64})
	admin := Booker{User: "root", Admin: true}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		nodes []string
		gpus  int
		want  string // the allocation, "" for a refusal
	}{
		{"any node: the one up", nil, 2, "GPUs 0-1 on n2"},
		{"more than the nodes up hold", nil, 3, ""},
		{"the down node named", []string{"n1"}, 1, "GPU 0 on n1"},
	}
	for i, tc := range cases {
		rq := req(fmt.Sprintf("b%d", i), tc.gpus, base, time.Duration(9+2*i)*time.Hour, time.Duration(10+2*i)*time.Hour)
		if tc.nodes != nil {
			rq.Nodes = &tc.nodes
		}
		r, _, err := create(b, now, rq, admin)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: booked %s, want a refusal", tc.name, holds.GPUs(r.Allocation))
		case tc.want != "" && (err != nil || holds.GPUs(r.Allocation) != tc.want):
			t.Errorf("%s: booked %s (%v), want %s", tc.name, holds.GPUs(r.Allocation), err, tc.want)
		}
	}
}
