package gpubook

import (
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/sched"
)

// Snapshot is the core's view of the nodes (nodebook.Node.Snap), with
// every GPU that a job or hold owns, or that a process outside Corral
// uses, marked not free, and the slices and shares of MIG and shared
// GPUs added, each holder named as people know it (Label).
func (b *Book) Snapshot(jobs Jobs) []sched.Node {
	var label func(string) string // made at the first GPU with parts: most clusters have none
	out := make([]sched.Node, 0, b.nodes.Len())
	for i := range b.nodes.Len() {
		n := b.nodes.At(i)
		sn := n.Snap()
		for k := range sn.GPUs {
			g, d := &sn.GPUs[k], &n.Devices[k]
			_, busy := b.owner[Key{Node: n.ID, GPU: d.Index}]
			taken := busy || g.Foreign
			if busy { // Corral's own: neither free nor a stranger's
				g.Free, g.Foreign = false, false
			}
			if d.Shared || d.MIG != nil {
				if label == nil {
					label = func(id string) string { return Label(jobs, id) }
				}
				b.parts.Snap(g, Key{Node: n.ID, GPU: d.Index}, d.MIG, d.Shared, taken, label)
			}
		}
		out = append(out, sn)
	}
	return out
}

// Label is a holder of a slice or share as people know it: the job's
// short number, else its id (a hold's name, or a job without a number).
func Label(jobs Jobs, id string) string {
	if j := jobs(id); j != nil && j.Number > 0 {
		return j.ShortID()
	}
	return id
}

// Place is the core's answer for j alone on the cluster as it is at now:
// first come, first served, on the GPUs free now, kept off the booked
// intervals given. It changes nothing: what a hold asks before it takes
// GPUs (Allocate).
func (b *Book) Place(now time.Time, j sched.Job, booked []sched.Booking, jobs Jobs) sched.Result {
	return sched.Schedule(sched.Snapshot{Now: now, Nodes: b.Snapshot(jobs), Queue: []sched.Job{j},
		Policy: sched.Policy{Name: sched.PolicyFCFS}, Bookings: booked})
}

// GPU copies what the books say of one GPU of a node for GET
// /cluster/gpu-status (readview.Cluster builds the view): its owner,
// whether that owner is a hold (held), and the holders of its MIG slices
// and MPS shares, each job with its short number.
func (b *Book) GPU(node string, d *gpuinfo.Device, jobs Jobs, held func(id string) bool) readview.GPUBooks {
	number := func(id string) string { // a job's short number; "" for a hold
		if j := jobs(id); j != nil {
			return j.ShortID()
		}
		return ""
	}
	k := Key{Node: node, GPU: d.Index}
	g := readview.GPUBooks{Shared: d.Shared, PartsBusy: b.parts.Busy(k, d.MIG)}
	if holder, ok := b.owner[k]; ok {
		g.Owner = readview.Holder{ID: holder, Number: number(holder)}
		g.Held = held(holder)
	}
	if d.MIG != nil {
		m := *d.MIG // the node's record is shared: the view changes a copy
		m.Devices = slices.Clone(m.Devices)
		g.MIG, g.Slices = &m, make([]readview.Holder, len(m.Devices))
		for i := range m.Devices {
			if h := b.parts.SliceHolder(k, m.Devices[i].Index); h != "" {
				g.Slices[i] = readview.Holder{ID: h, Number: number(h)}
			}
		}
	}
	for _, h := range b.parts.Shares(k) {
		g.Shares = append(g.Shares, api.GPUShareHolder{JobID: h.ID, User: h.User, MemoryMiB: h.MiB, Compute: h.Compute, Number: number(h.ID)})
	}
	return g
}

// Profiles lists the MIG profiles the nodes' GPUs offer, sorted, each
// once (gpushare.Profiles): what a notebook's default slice must be
// among.
func (b *Book) Profiles() []string {
	var ms []*api.MIG
	for _, n := range b.nodes.All() {
		for k := range n.Devices {
			ms = append(ms, n.Devices[k].MIG)
		}
	}
	return gpushare.Profiles(ms)
}
