package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The cluster's history for the dashboard's graphs: a ring of compact
// samples, one every HistoryInterval, kept for HistoryRetention, in memory
// and in the store (history_store.go), so that it spans restarts.
const (
	HistoryInterval  = 15 * time.Second
	HistoryRetention = 24 * time.Hour
	historySlots     = int(HistoryRetention/HistoryInterval) + 1
)

// histSample is the cluster at one moment. Counts (started, completed,
// failed, waits) are those since the previous sample.
type histSample struct {
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

// history is the ring and the tally that feeds its counts. It has its own
// lock: sampling reads the orchestrator under its read lock and never
// holds both longer than a copy.
type history struct {
	mu      sync.Mutex
	ring    ring[histSample]
	last    time.Time // the previous sample's time
	tally   tally
	pending interval  // counted since the previous sample
	cycles  Histogram // scheduling-cycle durations, seconds
}

// catchUp counts the events added since the last call; those after the
// previous sample go to the next one. Read lock and history lock held.
func (h *history) catchUp(o *Orchestrator, now time.Time) {
	since := h.last
	if since.IsZero() {
		since = now.Add(-HistoryInterval)
	}
	h.pending.merge(h.tally.advance(o, since))
}

func (h *history) add(s histSample) {
	h.ring.push(s, historySlots)
}

// each calls f on the samples from since on, oldest first.
func (h *history) each(since time.Time, f func(*histSample)) {
	for s := range h.ring.all() {
		if !s.at.Before(since) {
			f(s)
		}
	}
}

// recordHistory samples the cluster now and then every HistoryInterval
// until ctx ends. Run starts it.
func (o *Orchestrator) recordHistory(ctx context.Context) {
	t := time.NewTicker(HistoryInterval)
	defer t.Stop()
	for {
		o.SampleHistory(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleHistory adds one sample of the cluster to the history now. The
// loop calls it every HistoryInterval; tests call it directly.
func (o *Orchestrator) SampleHistory(ctx context.Context) {
	cs := o.Cluster(ctx)
	o.mu.RLock()
	now := o.cfg.Now().UTC()
	s := histSample{at: now, queued: int32(len(o.queued)), running: int32(len(o.active))}
	o.hist.mu.Lock()
	o.hist.catchUp(o, now)
	iv := o.hist.pending
	o.hist.pending, o.hist.last = interval{}, now
	o.hist.mu.Unlock()
	o.mu.RUnlock()

	s.started, s.completed, s.failed, s.waitSum, s.waitMax = iv.started, iv.completed, iv.failed, iv.waitSum, iv.waitMax
	s.total, s.allocated, s.held, s.foreign = int32(cs.TotalGPUs), int32(cs.AllocatedGPUs), int32(cs.HeldGPUs), int32(cs.ForeignGPUs)
	s.nodes = make([]nodeSample, 0, len(cs.Nodes))
	for _, n := range cs.Nodes {
		ns := nodeSample{id: n.NodeID, gpus: int16(len(n.GPUs)), down: n.State == NodeDown}
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
	o.hist.mu.Lock()
	o.hist.add(s)
	o.hist.mu.Unlock()
	o.persistSample(ctx, &s)
}

// HistoryQuery selects a ClusterHistory.
type HistoryQuery struct {
	Since  time.Time // default: an hour before now
	Points int       // about this many points (default 360, at most 5000)
	Node   string    // "": cluster only; "all": every node too; else that node too
}

// ClusterHistory averages the samples since q.Since into about q.Points
// steps, oldest first. Steps without samples are left out.
func (o *Orchestrator) ClusterHistory(q HistoryQuery) api.History {
	now := o.cfg.Now().UTC()
	if q.Since.IsZero() || q.Since.After(now) {
		q.Since = now.Add(-time.Hour)
	}
	if q.Since.Before(now.Add(-HistoryRetention)) {
		q.Since = now.Add(-HistoryRetention)
	}
	if q.Points <= 0 {
		q.Points = 360
	}
	q.Points = min(q.Points, 5000)
	step := max(now.Sub(q.Since)/time.Duration(q.Points), HistoryInterval)
	step = step.Round(time.Second)
	out := api.History{Since: q.Since, Until: now, Step: api.Seconds(step.Seconds()), Interval: api.Seconds(HistoryInterval.Seconds()), Points: []api.HistoryPoint{}}

	o.hist.mu.Lock()
	defer o.hist.mu.Unlock()
	var b bucket
	cur := -1
	o.hist.each(q.Since, func(s *histSample) {
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

func (b *bucket) add(s *histSample, node string) {
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
