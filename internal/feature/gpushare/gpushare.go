// Package gpushare keeps the books of GPU sharing: which job holds each
// MIG slice, and which MPS shares run on each shared GPU. It turns a
// node's reported devices and these books into the core's view of them
// (sched.GPU's MIG and Share), a placement's part into the allocation
// that the job carries (and the store keeps: the books are rebuilt from
// the running jobs' allocations at restart), and an allocation back into
// its release. The whole GPUs' owners are package gpubook's, which keeps
// these books beside them: a slice or share never enters the owners.
package gpushare

import (
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// Key names one GPU of one node.
type Key struct {
	Node string
	GPU  int
}

type sliceKey struct {
	Key
	MIG int
}

// Holder is one share running on a shared GPU.
type Holder struct {
	ID      string
	User    string
	MiB     int64
	Compute int
}

// Books are the slices' and shares' holders. Not safe for concurrent
// use: the orchestrator's lock guards them, within its GPU books
// (gpubook.Book).
type Books struct {
	slices map[sliceKey]string
	shares map[Key][]Holder
}

// New returns empty books.
func New() *Books {
	return &Books{slices: map[sliceKey]string{}, shares: map[Key][]Holder{}}
}

// Partial reports whether the allocation is a part of its GPU.
func Partial(a *api.Allocation) bool { return a.MIG != nil || a.ShareMiB > 0 }

// Take records that id (of user) holds the allocation's part. A whole
// GPU's allocation is not recorded here and Take returns false.
func (b *Books) Take(id, user string, a *api.Allocation) bool {
	k := Key{a.NodeID, a.GPUID}
	switch {
	case a.MIG != nil:
		b.slices[sliceKey{k, a.MIG.Index}] = id
	case a.ShareMiB > 0:
		hs := b.shares[k]
		if slices.ContainsFunc(hs, func(h Holder) bool { return h.ID == id }) {
			return true
		}
		b.shares[k] = append(hs, Holder{ID: id, User: user, MiB: a.ShareMiB, Compute: a.ShareCompute})
	default:
		return false
	}
	return true
}

// Release forgets id's parts among the allocations.
func (b *Books) Release(id string, as []api.Allocation) {
	for i := range as {
		a := &as[i]
		k := Key{a.NodeID, a.GPUID}
		switch {
		case a.MIG != nil:
			if sk := (sliceKey{k, a.MIG.Index}); b.slices[sk] == id {
				delete(b.slices, sk)
			}
		case a.ShareMiB > 0:
			hs := slices.DeleteFunc(b.shares[k], func(h Holder) bool { return h.ID == id })
			if len(hs) == 0 {
				delete(b.shares, k)
			} else {
				b.shares[k] = hs
			}
		}
	}
}

// SliceHolder is who holds slice mig of the GPU ("" when free).
func (b *Books) SliceHolder(k Key, mig int) string { return b.slices[sliceKey{k, mig}] }

// Shares are the shares running on the GPU.
func (b *Books) Shares(k Key) []Holder { return b.shares[k] }

// Busy reports whether any part of the GPU is held.
func (b *Books) Busy(k Key, m *api.MIG) bool {
	if len(b.shares[k]) > 0 {
		return true
	}
	if MIGMode(m) {
		for _, d := range m.Devices {
			if b.slices[sliceKey{k, d.Index}] != "" {
				return true
			}
		}
	}
	return false
}

// MIGMode reports whether a GPU's slices are what is placed: MIG is on
// and it has MIG devices.
func MIGMode(m *api.MIG) bool {
	return m != nil && m.Mode == api.MIGEnabled && len(m.Devices) > 0
}

// Snap fills the core's view of one GPU: its slices, free unless held
// (label says a holder as people know it: a job's number), when in MIG
// mode; its shares when shared. whole says a whole-GPU job or hold has
// it: then no slice is free and no share may join.
func (b *Books) Snap(g *sched.GPU, k Key, m *api.MIG, shared, whole bool, label func(string) string) {
	if MIGMode(m) {
		g.Free = false
		g.MIGSlices = m.ComputeSlices
		g.MIG = make([]sched.Slice, len(m.Devices))
		for i, d := range m.Devices {
			h := b.slices[sliceKey{k, d.Index}]
			s := sched.Slice{Index: d.Index, Profile: d.Profile, MemoryMiB: d.MemoryTotal, ComputeSlices: d.ComputeSlices, Free: h == "" && !whole}
			if h != "" {
				s.Holder = label(h)
			}
			g.MIG[i] = s
		}
		return
	}
	if !shared {
		return
	}
	sh := &sched.Share{}
	for _, h := range b.shares[k] {
		sh.UsedMiB += h.MiB
		sh.UsedCompute += h.Compute
		sh.User = h.User
		sh.Holders = append(sh.Holders, label(h.ID))
	}
	if len(sh.Holders) > 0 {
		g.Free = false
	}
	g.Share = sh
}

// Allocate is the allocation of a placement's part of a GPU: the slice
// (its UUID found in m) or the share, with its fraction.
func Allocate(a api.Allocation, p *sched.Part, m *api.MIG) api.Allocation {
	a.Fraction = p.Fraction
	if p.MIG < 0 {
		a.ShareMiB, a.ShareCompute = p.ShareMiB, p.ShareCompute
		a.MemoryGB = float64(p.ShareMiB) / 1024
		return a
	}
	s := &api.AllocatedSlice{Index: p.MIG, Profile: p.Profile}
	if m != nil {
		for _, d := range m.Devices {
			if d.Index == p.MIG {
				s.UUID = d.UUID
				a.MemoryGB = float64(d.MemoryTotal) / 1024
			}
		}
	}
	a.MIG = s
	return a
}

// Equivalents is a job's allocation in GPU-equivalents (api.Allocation's).
func Equivalents(as []api.Allocation) float64 {
	e := 0.0
	for i := range as {
		e += as[i].Equivalents()
	}
	return e
}

// Profiles lists the MIG profiles the GPUs offer, sorted, each once.
func Profiles(ms []*api.MIG) []string {
	var out []string
	for _, m := range ms {
		if !MIGMode(m) {
			continue
		}
		for _, d := range m.Devices {
			if d.Profile != "" && !slices.ContainsFunc(out, func(p string) bool { return strings.EqualFold(p, d.Profile) }) {
				out = append(out, d.Profile)
			}
		}
	}
	slices.Sort(out)
	return out
}
