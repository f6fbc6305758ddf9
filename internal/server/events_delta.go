package server

import (
	"encoding/json"
	"hash/maphash"
	"slices"

	"github.com/corral-sched/corral/internal/api"
)

// streamView is what one GET /events stream last sent, enough to send the
// next event as an api.DashboardDelta against it: per list (queue rows,
// active jobs, nodes) the ids in order and a hash of each item's JSON, and
// the rows' positions. It keeps no item, so it costs a few dozen bytes per
// item sent. Not safe for concurrent use: one per stream.
type streamView struct {
	seed      maphash.Seed
	rows      listView
	positions map[string]int // queue row id -> its position as sent
	active    listView
	nodes     listView
}

// listView is one list as a stream last sent it.
type listView struct {
	order []string          // the ids, in order
	sums  map[string]uint64 // id -> hash of the item as sent
}

func newStreamView() *streamView {
	return &streamView{seed: maphash.MakeSeed()}
}

// delta is what changed from what the stream last sent to u; it then
// remembers u as sent. On a new view it remembers u and returns a delta
// that lists everything (the stream sends u itself instead).
func (v *streamView) delta(u api.DashboardUpdate) (api.DashboardDelta, error) {
	d := api.DashboardDelta{At: u.At, Status: u.Status}
	c := u.Cluster
	d.Cluster = api.ClusterDelta{TotalGPUs: c.TotalGPUs, AvailableGPUs: c.AvailableGPUs, AllocatedGPUs: c.AllocatedGPUs,
		HeldGPUs: c.HeldGPUs, ForeignGPUs: c.ForeignGPUs}
	var err error
	if d.Cluster.Nodes, err = diffList(&v.nodes, c.Nodes, func(n api.Node) string { return n.NodeID }, sumOf[api.Node](v)); err != nil {
		return d, err
	}
	if d.Active, err = diffList(&v.active, u.Active, func(j api.Job) string { return j.ID }, sumOf[api.Job](v)); err != nil {
		return d, err
	}
	q := u.Queue
	d.Queue = api.QueueDelta{Statistics: q.Statistics, Arrays: q.Arrays, NextCursor: q.NextCursor}
	// A row is compared without what moves with the clock (the client
	// derives the waits from at) or with other jobs (its position).
	rowSum := func(r api.QueuedJob) (uint64, error) {
		r.WaitedSeconds, r.EstimatedWaitTime, r.QueuePosition = 0, nil, 0
		return v.sum(r)
	}
	if d.Queue.QueuedJobs, err = diffList(&v.rows, q.QueuedJobs, func(r api.QueuedJob) string { return r.ID }, rowSum); err != nil {
		return d, err
	}
	// Positions go when a row the client keeps has moved (a new or
	// changed row carries its own).
	positions := make(map[string]int, len(q.QueuedJobs))
	for _, r := range q.QueuedJobs {
		positions[r.ID] = r.QueuePosition
		if p, ok := v.positions[r.ID]; ok && p != r.QueuePosition && d.Queue.Positions == nil {
			d.Queue.Positions = make([]int, len(q.QueuedJobs))
			for i, r := range q.QueuedJobs {
				d.Queue.Positions[i] = r.QueuePosition
			}
		}
	}
	v.positions = positions
	return d, nil
}

// sum hashes x's JSON.
func (v *streamView) sum(x any) (uint64, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return 0, err
	}
	return maphash.Bytes(v.seed, b), nil
}

// sumOf is v.sum for items of type T.
func sumOf[T any](v *streamView) func(T) (uint64, error) {
	return func(x T) (uint64, error) { return v.sum(x) }
}

// diffList is how items differ from what l holds (see api.ListDelta); l
// then holds items. Order is set only when removing, replacing and
// appending do not give the items' order.
func diffList[T any](l *listView, items []T, id func(T) string, sum func(T) (uint64, error)) (api.ListDelta[T], error) {
	var d api.ListDelta[T]
	order := make([]string, len(items))
	sums := make(map[string]uint64, len(items))
	var added []string
	for i, it := range items {
		k := id(it)
		s, err := sum(it)
		if err != nil {
			return d, err
		}
		order[i], sums[k] = k, s
		old, ok := l.sums[k]
		if !ok {
			added = append(added, k)
		}
		if !ok || old != s {
			d.Upsert = append(d.Upsert, it)
		}
	}
	implied := make([]string, 0, len(items))
	for _, k := range l.order {
		if _, ok := sums[k]; ok {
			implied = append(implied, k)
		} else {
			d.Remove = append(d.Remove, k)
		}
	}
	implied = append(implied, added...)
	if !slices.Equal(implied, order) {
		d.Order = order
	}
	l.order, l.sums = order, sums
	return d, nil
}

// nextEvent is the event a stream sends for u, its name and data: the
// whole update when first, else the delta against what view holds.
func nextEvent(view *streamView, u api.DashboardUpdate, first bool) (string, []byte, error) {
	d, err := view.delta(u)
	if err != nil {
		return "", nil, err
	}
	if first {
		data, err := json.Marshal(u)
		return "update", data, err
	}
	data, err := json.Marshal(d)
	return "delta", data, err
}
