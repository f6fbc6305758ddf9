package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// serverLog is a Link whose ShipLog keeps logs as the server does
// (Orchestrator.WriteLog): a chunk past the end of its copy is refused
// (409 log_gap), one that overlaps adds only the bytes it lacks.
type serverLog struct {
	fakeLink
	mu   sync.Mutex
	logs map[string][]byte
}

func (s *serverLog) ShipLog(_ context.Context, c api.LogChunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.logs[c.JobID]
	if c.Offset > int64(len(have)) {
		return api.Conflict("log_gap", "the stored log ends at byte %d; send from there", len(have))
	}
	if end := c.Offset + int64(len(c.Data)); end > int64(len(have)) {
		s.logs[c.JobID] = append(have, c.Data[int64(len(have))-c.Offset:]...)
	}
	return nil
}

// After a fail-over the new leader holds none of a running job's log that
// the agent shipped to the old one: the agent ships the log again from its
// start, so the new leader's copy is whole, and goes on from there.
func TestShipLogAfterFailover(t *testing.T) {
	dir := t.TempDir()
	ts := newTasks(t, dir, 0)
	k := taskKey{"j1", 0, 0}
	os.MkdirAll(filepath.Dir(ts.logPath(k)), 0o700)
	os.WriteFile(ts.logPath(k), []byte("first line\n"), 0o600)
	ts.byKey[k] = &task{spec: api.TaskSpec{JobID: "j1"}}

	old := &serverLog{logs: map[string][]byte{}}
	a := &Agent{cfg: Config{NodeID: "n1", Link: old}, tasks: ts, log: slog.New(slog.DiscardHandler)}
	a.shipLogs(context.Background())
	if got := string(old.logs["j1"]); got != "first line\n" {
		t.Fatalf("the first leader holds %q", got)
	}

	// The leader dies; the job writes on; the new leader has nothing.
	f, _ := os.OpenFile(ts.logPath(k), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("second line\n")
	f.Close()
	lead := &serverLog{logs: map[string][]byte{}}
	a.cfg.Link = lead
	a.shipLogs(context.Background())
	if got := string(lead.logs["j1"]); got != "first line\nsecond line\n" {
		t.Errorf("the new leader holds %q; want the whole log", got)
	}
	if got := ts.byKey[k].shipped; got != int64(len("first line\nsecond line\n")) {
		t.Errorf("shipped = %d; want the whole log's length", got)
	}
}
