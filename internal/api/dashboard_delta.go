package api

import "time"

// Apply turns u, the update a delta was computed against (the stream's
// `update`, with the deltas before d applied), into the update d
// describes. It recomputes each queue row's waited_seconds and
// estimated_wait_time from d.At. The lists of u are new slices after it;
// their items may be shared with d.
func (u *DashboardUpdate) Apply(d DashboardDelta) {
	u.At, u.Status = d.At, d.Status
	c := &u.Cluster
	c.TotalGPUs, c.AvailableGPUs, c.AllocatedGPUs = d.Cluster.TotalGPUs, d.Cluster.AvailableGPUs, d.Cluster.AllocatedGPUs
	c.HeldGPUs, c.ForeignGPUs = d.Cluster.HeldGPUs, d.Cluster.ForeignGPUs
	c.Nodes = applyList(c.Nodes, d.Cluster.Nodes, func(n Node) string { return n.NodeID })
	q := &u.Queue
	q.Statistics, q.Arrays, q.NextCursor = d.Queue.Statistics, d.Queue.Arrays, d.Queue.NextCursor
	q.QueuedJobs = applyList(q.QueuedJobs, d.Queue.QueuedJobs, func(r QueuedJob) string { return r.ID })
	for i := range q.QueuedJobs {
		r := &q.QueuedJobs[i]
		if i < len(d.Queue.Positions) {
			r.QueuePosition = d.Queue.Positions[i]
		}
		r.WaitClock(d.At)
	}
	u.Active = applyList(u.Active, d.Active, func(j Job) string { return j.ID })
}

// WaitClock sets the row's fields that move with the clock as of now:
// waited_seconds (since queued_at) and estimated_wait_time (until
// estimated_start_time, never negative; nil without one).
func (r *QueuedJob) WaitClock(now time.Time) {
	r.WaitedSeconds = now.Sub(r.QueuedAt).Seconds()
	r.EstimatedWaitTime = nil
	if r.EstimatedStartTime != nil {
		wait := max(r.EstimatedStartTime.Sub(now).Seconds(), 0)
		r.EstimatedWaitTime = &wait
	}
}

// applyList applies d to old (see ListDelta) into a new slice.
func applyList[T any](old []T, d ListDelta[T], id func(T) string) []T {
	gone := make(map[string]bool, len(d.Remove))
	for _, k := range d.Remove {
		gone[k] = true
	}
	fresh := make(map[string]int, len(d.Upsert)) // id -> index in d.Upsert
	for i, it := range d.Upsert {
		fresh[id(it)] = i
	}
	out := make([]T, 0, len(old)+len(d.Upsert))
	kept := make(map[string]bool, len(d.Upsert))
	for _, it := range old {
		k := id(it)
		if gone[k] {
			continue
		}
		if i, ok := fresh[k]; ok {
			it, kept[k] = d.Upsert[i], true
		}
		out = append(out, it)
	}
	for _, it := range d.Upsert {
		if !kept[id(it)] {
			out = append(out, it)
		}
	}
	if d.Order == nil {
		return out
	}
	at := make(map[string]int, len(out))
	for i, it := range out {
		at[id(it)] = i
	}
	ordered := make([]T, 0, len(out))
	for _, k := range d.Order {
		if i, ok := at[k]; ok {
			ordered = append(ordered, out[i])
		}
	}
	return ordered
}
