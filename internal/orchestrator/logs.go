package orchestrator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/corral-sched/corral/internal/api"
)

// RankLogPath is where rank N of an attempt writes its output: the
// attempt's log for rank 0, N.rankR.log beside it for the others.
func (o *Orchestrator) RankLogPath(jobID string, attempt, rank int) string {
	if rank == 0 {
		return o.LogPath(jobID, attempt)
	}
	return o.attemptPath(jobID, attempt, ".rank"+strconv.Itoa(rank)+".log")
}

// maxLogChunk bounds one shipped chunk.
const maxLogChunk = 1 << 20

// WriteLog stores a chunk of a task's output shipped by a remote agent. The
// node must hold that job. A chunk that starts past the end of what is
// stored is refused (the agent resends from the end); one that overlaps it
// adds only the new bytes, so retries are harmless. Past Config.MaxLogSize
// bytes the log gets one marker line, and later chunks are accepted and
// dropped. A failed write (a full disk) fails only this request; the
// agent sends the chunk again later.
func (o *Orchestrator) WriteLog(c api.LogChunk) error {
	return o.writeLog(c, false)
}

// WritePlacedLog is WriteLog for a chunk whose node the caller has found
// to be the one the rank was placed on (the agents pool's RanOn): the
// job's allocation is not asked, because a job of no GPUs has none and
// names no node. The job, its ranks and its attempts are checked as in
// WriteLog.
func (o *Orchestrator) WritePlacedLog(c api.LogChunk) error {
	return o.writeLog(c, true)
}

func (o *Orchestrator) writeLog(c api.LogChunk, placed bool) error {
	if len(c.Data) > maxLogChunk || c.Offset < 0 || c.Rank < 0 || c.Attempt < 0 {
		return api.Invalid("data", "a log chunk holds at most %d bytes at a non-negative offset", maxLogChunk)
	}
	o.mu.RLock()
	j, ok := o.lookup(c.JobID) // finished.go: a log's tail comes after its job ended
	holds := placed
	if ok {
		for _, a := range j.Allocation {
			holds = holds || a.NodeID == c.NodeID
		}
		holds = holds || c.Attempt < j.RetryCount // an earlier attempt's tail
	}
	ranks, attempts := 0, 0
	if ok {
		ranks, attempts = max(j.Nodes, 1), j.RetryCount
	}
	o.mu.RUnlock()
	if !ok || !holds {
		return api.NotFound("node %s runs no job %q", c.NodeID, c.JobID)
	}
	// Only the job's ranks and attempts have logs: each is capped, and
	// an agent may not make more of them.
	if c.Rank >= ranks || c.Attempt > attempts {
		return api.Invalid("rank", "job %s has ranks 0 to %d and attempts 0 to %d", c.JobID, ranks-1, attempts)
	}
	path := o.RankLogPath(c.JobID, c.Attempt, c.Rank)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write log: %w", err)
	}
	size, limit := st.Size(), o.cfg.MaxLogSize
	switch {
	case limit > 0 && size >= limit:
		return nil // capped: the marker is there, the rest is dropped
	case c.Offset > size:
		return api.Conflict("log_gap", "the stored log ends at byte %d; send from there", size)
	case c.Offset+int64(len(c.Data)) <= size:
		return nil // already stored
	}
	data := c.Data[size-c.Offset:]
	capped := limit > 0 && size+int64(len(data)) > limit
	if capped {
		data = data[:limit-size]
	}
	if _, err := f.WriteAt(data, size); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	if capped {
		marker := fmt.Sprintf("\ncorral: the stored log reached its limit of %d bytes (--max-log-size of the server); further output of this attempt is dropped\n", limit)
		if _, err := f.WriteAt([]byte(marker), limit); err != nil {
			return fmt.Errorf("write log: %w", err)
		}
	}
	return nil
}
