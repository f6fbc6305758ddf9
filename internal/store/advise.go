package store

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Run is one job's hold of GPUs over an interval, as `corral advise`
// profiles it (advise.Run has the same fields: the store does not import
// the packages that read it).
type Run struct {
	Start, End  time.Time
	GPUs        int // per node
	Nodes       int
	GPUMemoryGB float64
}

// Runs returns, for `corral advise`, the GPU holds of jobs that ran in
// [since, until): each job's latest attempt, from its start to its end
// (until, while it runs), on its granted GPUs. It reads the jobs table,
// not the orchestrator's memory (finished jobs are not kept there).
// Earlier attempts of retried jobs are not seen here.
func (s *Store) Runs(ctx context.Context, since, until time.Time) ([]Run, error) {
	var runs []Run
	// Running jobs, and those that ended in the period (the finished
	// column is indexed: jobs_history.go).
	query := `SELECT data FROM jobs WHERE state = 'running' UNION ALL
		SELECT data FROM jobs WHERE finished >= ? AND state IN ` + terminalStates
	err := s.read(ctx, query, []any{since.UnixNano()}, jobRows(func(j api.Job) error {
		if j.StartedAt == nil {
			return nil
		}
		end := until
		if j.FinishedAt != nil {
			end = *j.FinishedAt
		}
		if !end.After(since) || !j.StartedAt.Before(until) {
			return nil
		}
		nodes := max(j.Nodes, 1)
		gpus := j.GrantedGPUs / nodes
		if j.GrantedGPUs == 0 {
			gpus = j.GPUCount
		}
		runs = append(runs, Run{Start: *j.StartedAt, End: end, GPUs: gpus, Nodes: nodes, GPUMemoryGB: j.GPUMemoryGB})
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("advise: %w", err)
	}
	return runs, nil
}
