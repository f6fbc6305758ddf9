// Package history is the cluster over time, for the dashboard's graphs
// and the metrics: a ring of compact samples, one every Interval, kept
// for Retention in memory and in the store (store.go), so that it spans
// restarts; the counts of job events that feed the samples and the
// Prometheus counters (tally.go); and the histogram of scheduling
// cycles. The orchestrator takes a sample every Interval and hands over
// what it reads of its own books (the jobs in memory, the cluster's
// status); the history never reads them itself.
package history

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/ring"
)

// The cluster's history for the dashboard's graphs: a ring of compact
// samples, one every Interval, kept for Retention, in memory
// and in the store (history_store.go), so that it spans restarts.
const (
	Interval  = 15 * time.Second
	Retention = 24 * time.Hour
	slots     = int(Retention/Interval) + 1
)

// sample is the cluster at one moment. Counts (started, completed,
// failed, waits) are those since the previous sample.
type sample struct {
	at                                    time.Time
	total, allocated, held, foreign, down int32
	utilSum                               int64 // percent, summed over all GPUs
	memUsed, memTotal                     int64 // MiB
	queued, running                       int32
	started, completed, failed            int32
	waitSum, waitMax                      float64
	nodes                                 []nodeSample
}

type nodeSample struct {
	id              string
	gpus, allocated int16
	utilSum         int32
	memUsed         int64
	down            bool
}

// Books is the feature: the ring of samples, the tally that feeds their
// counts, and the histogram of scheduling cycles. It has its own lock:
// the orchestrator reads its own books under its read lock and hands
// them over (Jobs), never holding both longer than a copy.
type Books struct {
	mu      sync.Mutex
	ring    ring.Ring[sample]
	last    time.Time // the previous sample's time
	tally   tally
	pending interval  // counted since the previous sample
	cycles  Histogram // scheduling-cycle durations, seconds
}

// catchUp counts the events added since the last call; those after the
// previous sample go to the next one. h.mu held.
func (h *Books) catchUp(jobs iter.Seq[*api.Job], now time.Time) {
	since := h.last
	if since.IsZero() {
		since = now.Add(-Interval)
	}
	h.pending.merge(h.tally.advance(jobs, since))
}

func (h *Books) add(s sample) {
	h.ring.Push(s, slots)
}

// each calls f on the samples from since on, oldest first.
func (h *Books) each(since time.Time, f func(*sample)) {
	for s := range h.ring.All() {
		if !s.at.Before(since) {
			f(s)
		}
	}
}

// Take brings the counts up to date with jobs (every job in memory, in
// submission order; the caller holds what guards them) and returns those
// since the previous sample, which now ends at now.
func (h *Books) Take(jobs iter.Seq[*api.Job], now time.Time) Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.catchUp(jobs, now)
	iv := h.pending
	h.pending, h.last = interval{}, now
	return Counts{Started: iv.started, Completed: iv.completed, Failed: iv.failed, WaitSum: iv.waitSum, WaitMax: iv.waitMax}
}

// nodeDown is the state of a node silent past its TTL, as the
// orchestrator reports it (orchestrator.NodeDown).
const nodeDown = "down"

// Counts are the job events of one sample's interval.
type Counts struct {
	Started, Completed, Failed int32
	WaitSum, WaitMax           float64 // seconds, of the starts
}

// Add makes a sample of the cluster at now from its status, the queued
// and running counts and the interval's counts, keeps it, and writes it
// to st (nil: not stored). A failure to store costs a point of the graphs
// after a restart, nothing else: it is returned for the caller to log.
func (h *Books) Add(ctx context.Context, st Store, now time.Time, cs api.ClusterStatus, queued, running int, iv Counts) error {
	s := sample{at: now, queued: int32(queued), running: int32(running)}
	s.started, s.completed, s.failed, s.waitSum, s.waitMax = iv.Started, iv.Completed, iv.Failed, iv.WaitSum, iv.WaitMax
	s.total, s.allocated, s.held, s.foreign = int32(cs.TotalGPUs), int32(cs.AllocatedGPUs), int32(cs.HeldGPUs), int32(cs.ForeignGPUs)
	s.nodes = make([]nodeSample, 0, len(cs.Nodes))
	for _, n := range cs.Nodes {
		ns := nodeSample{id: n.NodeID, gpus: int16(len(n.GPUs)), down: n.State == nodeDown}
		for _, g := range n.GPUs {
			ns.utilSum += int32(g.Utilization)
			ns.memUsed += g.MemoryUsed
			s.memTotal += g.MemoryTotal
			if g.AllocatedTo != nil {
				ns.allocated++
			}
		}
		if ns.down {
			s.down += int32(ns.gpus)
		}
		s.utilSum += int64(ns.utilSum)
		s.memUsed += ns.memUsed
		s.nodes = append(s.nodes, ns)
	}
	h.mu.Lock()
	h.add(s)
	h.mu.Unlock()
	if st == nil {
		return nil
	}
	return h.persist(ctx, st, &s)
}

// Query selects a ClusterHistory.
type Query struct {
	Since  time.Time // default: an hour before now
	Points int       // about this many points (default 360, at most 5000)
	Node   string    // "": cluster only; "all": every node too; else that node too
}

// History averages the samples since q.Since into about q.Points steps,
// oldest first, as of now. Steps without samples are left out.
func (h *Books) History(q Query, now time.Time) api.History {
	now = now.UTC()
	if q.Since.IsZero() || q.Since.After(now) {
		q.Since = now.Add(-time.Hour)
	}
	if q.Since.Before(now.Add(-Retention)) {
		q.Since = now.Add(-Retention)
	}
	if q.Points <= 0 {
		q.Points = 360
	}
	q.Points = min(q.Points, 5000)
	step := max(now.Sub(q.Since)/time.Duration(q.Points), Interval)
	step = step.Round(time.Second)
	out := api.History{Since: q.Since, Until: now, Step: api.Seconds(step.Seconds()), Interval: api.Seconds(Interval.Seconds()), Points: []api.HistoryPoint{}}

	h.mu.Lock()
	defer h.mu.Unlock()
	var b bucket
	cur := -1
	h.each(q.Since, func(s *sample) {
		k := int(s.at.Sub(q.Since) / step)
		if k != cur && b.n > 0 {
			out.Points = append(out.Points, b.point(q.Since.Add(time.Duration(cur+1)*step), step))
			b = bucket{}
		}
		cur = k
		b.add(s, q.Node)
	})
	if b.n > 0 {
		end := q.Since.Add(time.Duration(cur+1) * step)
		if end.After(now) {
			end = now
		}
		out.Points = append(out.Points, b.point(end, step))
	}
	return out
}

// bucket sums the samples of one step.
type bucket struct {
	n                                           int
	total, allocated, held, foreign, down       float64
	utilSum, memUsed, memTotal, queued, running float64
	started, completed, failed                  int
	waitSum, waitMax                            float64
	nodes                                       []api.NodePoint
	nodeN                                       map[string]int
	nodeIdx                                     map[string]int
}

func (b *bucket) add(s *sample, node string) {
	b.n++
	b.total += float64(s.total)
	b.allocated += float64(s.allocated)
	b.held += float64(s.held)
	b.foreign += float64(s.foreign)
	b.down += float64(s.down)
	b.utilSum += float64(s.utilSum)
	b.memUsed += float64(s.memUsed)
	b.memTotal += float64(s.memTotal)
	b.queued += float64(s.queued)
	b.running += float64(s.running)
	b.started += int(s.started)
	b.completed += int(s.completed)
	b.failed += int(s.failed)
	b.waitSum += s.waitSum
	b.waitMax = max(b.waitMax, s.waitMax)
	if node == "" {
		return
	}
	if b.nodeIdx == nil {
		b.nodeIdx, b.nodeN = map[string]int{}, map[string]int{}
	}
	for _, ns := range s.nodes {
		if node != "all" && ns.id != node {
			continue
		}
		i, ok := b.nodeIdx[ns.id]
		if !ok {
			i = len(b.nodes)
			b.nodeIdx[ns.id] = i
			b.nodes = append(b.nodes, api.NodePoint{NodeID: ns.id})
		}
		p := &b.nodes[i]
		b.nodeN[ns.id]++
		p.GPUs += float64(ns.gpus)
		p.AllocatedGPUs += float64(ns.allocated)
		p.MemoryUsedMiB += float64(ns.memUsed)
		if ns.gpus > 0 {
			p.Utilization += float64(ns.utilSum) / float64(ns.gpus)
		}
		p.Down = ns.down
	}
}

func (b *bucket) point(at time.Time, step time.Duration) api.HistoryPoint {
	n := float64(b.n)
	p := api.HistoryPoint{At: at, TotalGPUs: b.total / n, AllocatedGPUs: b.allocated / n, HeldGPUs: b.held / n,
		ForeignGPUs: b.foreign / n, DownGPUs: b.down / n, MemoryUsedMiB: b.memUsed / n, MemoryTotalMiB: b.memTotal / n,
		Queued: b.queued / n, Running: b.running / n, Started: b.started, Completed: b.completed, Failed: b.failed,
		StartsPerHour: float64(b.started) / step.Hours()}
	if b.total > 0 {
		p.Utilization = b.utilSum / b.total
	}
	if b.started > 0 {
		mean, mx := b.waitSum/float64(b.started), b.waitMax
		p.WaitMean, p.WaitMax = &mean, &mx
	}
	for _, np := range b.nodes {
		k := float64(b.nodeN[np.NodeID])
		np.GPUs /= k
		np.AllocatedGPUs /= k
		np.MemoryUsedMiB /= k
		np.Utilization /= k
		p.Nodes = append(p.Nodes, np)
	}
	return p
}
