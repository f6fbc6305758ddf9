package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/slurm"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// slurmFlags are `corral server --executor slurm`'s flags.
type slurmFlags struct {
	partition string
	account   string
	bin       string
	poll      time.Duration
}

func (s *slurmFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.partition, "slurm-partition", "", "with --executor slurm: the Slurm partition whose nodes Corral schedules on and where every sbatch goes (default: all nodes, Slurm's default partition)")
	fl.StringVar(&s.account, "slurm-account", "", "with --executor slurm: the Slurm account every sbatch is charged to (sbatch --account)")
	fl.StringVar(&s.bin, "slurm-bin", "", "with --executor slurm: the directory of sbatch, squeue, scontrol, scancel and sacct (default: from $PATH)")
	cmdkit.DurationVar(fl, &s.poll, "slurm-poll", 2*time.Second, "with --executor slurm: how often squeue and scontrol are asked for job and node states")
}

// check validates the flags before anything starts.
func (s slurmFlags) check() error {
	if s.poll <= 0 {
		return cmdkit.Usagef("--slurm-poll %s: must be positive", s.poll)
	}
	if s.bin != "" {
		if fi, err := os.Stat(s.bin); err != nil || !fi.IsDir() {
			return cmdkit.Usagef("--slurm-bin %s: not a directory", s.bin)
		}
	}
	return nil
}

// newSlurm builds the Slurm executor; its poll loop starts with run.
func (s slurmFlags) newSlurm(sink exec.Sink, o **orchestrator.Orchestrator, dataDir string, grace time.Duration, logger *slog.Logger) (*slurm.Executor, error) {
	ex, err := slurm.New(slurm.Config{
		Runner: slurm.CommandRunner{Bin: s.bin}, Sink: sink, Book: slurmBook{o},
		Partition: s.partition, Account: s.account, Grace: grace, Poll: s.poll,
		ScriptDir: filepath.Join(dataDir, "slurm"), Version: version, Logger: logger.With("executor", "slurm"),
	})
	if err != nil {
		return nil, fmt.Errorf("--executor slurm: %w", err)
	}
	return ex, nil
}

// slurmBook hands the Slurm executor's node news to the orchestrator once
// it exists.
type slurmBook struct{ o **orchestrator.Orchestrator }

func (b slurmBook) RegisterNode(ctx context.Context, reg api.AgentRegistration, addr string) error {
	return (*b.o).RegisterNode(ctx, reg, addr)
}

func (b slurmBook) NodeSeen(id string, r []api.GPUReading, f []api.ForeignProcess, at time.Time) {
	(*b.o).NodeSeen(id, r, f, at)
}

func (b slurmBook) NodeDown(id string, at time.Time) { (*b.o).NodeDown(id, at) }

func (b slurmBook) SetNodeState(ctx context.Context, id, action string) (api.NodeAction, error) {
	return (*b.o).SetNodeState(ctx, id, action)
}
