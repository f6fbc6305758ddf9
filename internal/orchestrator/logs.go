package orchestrator

import (
	"strconv"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/joblogs"
)

// RankLogPath is where rank N of an attempt writes its output: the
// attempt's log for rank 0, N.rankR.log beside it for the others.
func (o *Orchestrator) RankLogPath(jobID string, attempt, rank int) string {
	if rank == 0 {
		return o.LogPath(jobID, attempt)
	}
	return o.attemptPath(jobID, attempt, ".rank"+strconv.Itoa(rank)+".log")
}

// WriteLog stores a chunk of a task's output shipped by a remote agent
// (joblogs.Append: no gaps, no duplicates, capped at Config.MaxLogSize).
// The node must hold that job. A failed write (a full disk) fails only
// this request; the agent sends the chunk again later.
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
	if len(c.Data) > joblogs.MaxChunk || c.Offset < 0 || c.Rank < 0 || c.Attempt < 0 {
		return api.Invalid("data", "a log chunk holds at most %d bytes at a non-negative offset", joblogs.MaxChunk)
	}
	o.mu.RLock()
	j, ok := o.found().Lookup(c.JobID) // finished.go: a log's tail comes after its job ended
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
	return joblogs.Append(o.RankLogPath(c.JobID, c.Attempt, c.Rank), c.Offset, c.Data, o.cfg.MaxLogSize)
}

// LogTail returns the last n lines of an attempt's output (rank 0), for a
// failure's notification; nil when there is none. Safe from any
// goroutine (it reads only the file).
func (o *Orchestrator) LogTail(jobID string, attempt, n int) []string {
	return joblogs.Tail(o.LogPath(jobID, attempt), n)
}
