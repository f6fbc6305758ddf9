package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The history is kept in the store as well as in memory, so that the
// dashboard's graphs span a restart: each sample is written as it is
// taken, samples older than HistoryRetention are dropped, and New loads
// what is left.

// histRecord is a histSample as the store keeps it.
type histRecord struct {
	Total     int32            `json:"t"`
	Allocated int32            `json:"a"`
	Held      int32            `json:"h,omitempty"`
	Foreign   int32            `json:"f,omitempty"`
	Down      int32            `json:"d,omitempty"`
	UtilSum   int64            `json:"u"`
	MemUsed   int64            `json:"mu"`
	MemTotal  int64            `json:"mt"`
	Queued    int32            `json:"q"`
	Running   int32            `json:"r"`
	Started   int32            `json:"s,omitempty"`
	Completed int32            `json:"c,omitempty"`
	Failed    int32            `json:"x,omitempty"`
	WaitSum   float64          `json:"ws,omitempty"`
	WaitMax   float64          `json:"wm,omitempty"`
	Nodes     []histNodeRecord `json:"n,omitempty"`
}

type histNodeRecord struct {
	ID        string `json:"id"`
	GPUs      int16  `json:"g"`
	Allocated int16  `json:"a"`
	UtilSum   int32  `json:"u"`
	MemUsed   int64  `json:"m"`
	Down      bool   `json:"d,omitempty"`
}

func (s *histSample) record() histRecord {
	r := histRecord{Total: s.total, Allocated: s.allocated, Held: s.held, Foreign: s.foreign, Down: s.down,
		UtilSum: s.utilSum, MemUsed: s.memUsed, MemTotal: s.memTotal, Queued: s.queued, Running: s.running,
		Started: s.started, Completed: s.completed, Failed: s.failed, WaitSum: s.waitSum, WaitMax: s.waitMax}
	for _, n := range s.nodes {
		r.Nodes = append(r.Nodes, histNodeRecord{ID: n.id, GPUs: n.gpus, Allocated: n.allocated, UtilSum: n.utilSum, MemUsed: n.memUsed, Down: n.down})
	}
	return r
}

func (r histRecord) sample(at time.Time) histSample {
	s := histSample{at: at, total: r.Total, allocated: r.Allocated, held: r.Held, foreign: r.Foreign, down: r.Down,
		utilSum: r.UtilSum, memUsed: r.MemUsed, memTotal: r.MemTotal, queued: r.Queued, running: r.Running,
		started: r.Started, completed: r.Completed, failed: r.Failed, waitSum: r.WaitSum, waitMax: r.WaitMax}
	for _, n := range r.Nodes {
		s.nodes = append(s.nodes, nodeSample{id: n.ID, gpus: n.GPUs, allocated: n.Allocated, utilSum: n.UtilSum, memUsed: n.MemUsed, down: n.Down})
	}
	return s
}

// persistSample writes a sample to the store and drops expired ones. A
// failure costs a point of the graphs, nothing else: it is logged.
func (o *Orchestrator) persistSample(ctx context.Context, s *histSample) {
	data, err := json.Marshal(s.record())
	if err == nil {
		err = o.cfg.Store.PutHistory(ctx, s.at, data, s.at.Add(-HistoryRetention))
	}
	if err != nil && ctx.Err() == nil {
		o.log.Warn("history sample not stored", "err", err)
	}
}

// loadHistory fills the ring from the store's samples of the last
// HistoryRetention, and counts job events from the newest one on, so that
// the first sample after a restart covers the time the server was down.
func (o *Orchestrator) loadHistory(ctx context.Context) error {
	now := o.cfg.Now().UTC()
	rows, err := o.cfg.Store.History(ctx, now.Add(-HistoryRetention))
	if err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	o.hist.mu.Lock()
	defer o.hist.mu.Unlock()
	for _, row := range rows {
		var r histRecord
		if err := json.Unmarshal(row.Data, &r); err != nil {
			continue // a sample this version cannot read: a gap in the graphs
		}
		o.hist.add(r.sample(row.At))
		o.hist.last = row.At
	}
	return nil
}
