package history

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/store"
)

// The history is kept in the store as well as in memory, so that the
// dashboard's graphs span a restart: each sample is written as it is
// taken, samples older than Retention are dropped, and New loads
// what is left.

// histRecord is a sample as the store keeps it.
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

func (s *sample) record() histRecord {
	r := histRecord{Total: s.total, Allocated: s.allocated, Held: s.held, Foreign: s.foreign, Down: s.down,
		UtilSum: s.utilSum, MemUsed: s.memUsed, MemTotal: s.memTotal, Queued: s.queued, Running: s.running,
		Started: s.started, Completed: s.completed, Failed: s.failed, WaitSum: s.waitSum, WaitMax: s.waitMax}
	for _, n := range s.nodes {
		r.Nodes = append(r.Nodes, histNodeRecord{ID: n.id, GPUs: n.gpus, Allocated: n.allocated, UtilSum: n.utilSum, MemUsed: n.memUsed, Down: n.down})
	}
	return r
}

func (r histRecord) sample(at time.Time) sample {
	s := sample{at: at, total: r.Total, allocated: r.Allocated, held: r.Held, foreign: r.Foreign, down: r.Down,
		utilSum: r.UtilSum, memUsed: r.MemUsed, memTotal: r.MemTotal, queued: r.Queued, running: r.Running,
		started: r.Started, completed: r.Completed, failed: r.Failed, waitSum: r.WaitSum, waitMax: r.WaitMax}
	for _, n := range r.Nodes {
		s.nodes = append(s.nodes, nodeSample{id: n.ID, gpus: n.GPUs, allocated: n.Allocated, utilSum: n.UtilSum, memUsed: n.MemUsed, down: n.Down})
	}
	return s
}

// Store is where samples are kept across restarts (*store.Store).
type Store interface {
	// PutHistory stores a sample taken at at and drops those taken
	// before dropBefore.
	PutHistory(ctx context.Context, at time.Time, data []byte, dropBefore time.Time) error
	// History returns the samples taken since since, oldest first.
	History(ctx context.Context, since time.Time) ([]store.HistoryRow, error)
}

// persist writes a sample to the store and drops expired ones.
func (h *Books) persist(ctx context.Context, st Store, s *sample) error {
	data, err := json.Marshal(s.record())
	if err != nil {
		return fmt.Errorf("history sample: %w", err)
	}
	if err := st.PutHistory(ctx, s.at, data, s.at.Add(-Retention)); err != nil {
		return fmt.Errorf("history sample not stored: %w", err)
	}
	return nil
}

// Load fills the ring from the store's samples of the last Retention
// before now, and counts job events from the newest one on, so that the
// first sample after a restart covers the time the server was down.
func (h *Books) Load(ctx context.Context, st Store, now time.Time) error {
	rows, err := st.History(ctx, now.UTC().Add(-Retention))
	if err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, row := range rows {
		var r histRecord
		if err := json.Unmarshal(row.Data, &r); err != nil {
			continue // a sample this version cannot read: a gap in the graphs
		}
		h.add(r.sample(row.At))
		h.last = row.At
	}
	return nil
}
