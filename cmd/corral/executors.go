package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/agents"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// executorFlags choose what runs jobs (`corral server --executor`).
type executorFlags struct {
	name  string
	slurm slurmFlags // slurmflags.go
}

func (e *executorFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&e.name, "executor", "agents", "what runs jobs: agents (corral agent on each node) or slurm (sbatch on a Slurm cluster; see --slurm-*)")
	e.slurm.register(fl)
}

// check validates the flags before anything starts.
func (e executorFlags) check() error {
	switch e.name {
	case "", "agents":
		return nil
	case "slurm":
		return e.slurm.check()
	}
	return usagef("--executor %q: want agents or slurm", e.name)
}

// buildExecutor returns the executor named by --executor, and a function
// that runs its background work (polling) until ctx ends: nil for agents,
// whose agents call in. The executors are listed here, in one place.
func (e executorFlags) buildExecutor(pool *agents.Pool, sink exec.Sink, o **orchestrator.Orchestrator, dataDir string, grace time.Duration, logger *slog.Logger) (exec.Executor, func(context.Context), error) {
	switch e.name {
	case "slurm":
		ex, err := e.slurm.newSlurm(sink, o, dataDir, grace, logger)
		if err != nil {
			return nil, nil, err
		}
		return ex, func(ctx context.Context) { ex.Run(ctx) }, nil
	}
	return pool, nil, nil
}
