package daemon

import (
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/feature/cpujobs"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// cpuJobFlags is --max-running-cpu-jobs-per-user of `corral server` and
// `corral up`: how many jobs without GPUs one user may have running at
// once (docs/security.md).
type cpuJobFlags struct{ perUser int }

func (f *cpuJobFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.perUser, "max-running-cpu-jobs-per-user", cpujobs.DefaultMaxPerUser,
		"jobs without GPUs (gpu_count 0) one user may have running at once; more wait, pending reason user_cpu_job_limit (0: no limit)")
}

// apply puts the flag in the orchestrator's configuration.
func (f *cpuJobFlags) apply(cfg *orchestrator.Config) error {
	if f.perUser < 0 {
		return cmdkit.Usagef("--max-running-cpu-jobs-per-user %d: must not be negative (0: no limit)", f.perUser)
	}
	cfg.MaxRunningCPUJobsPerUser = f.perUser
	return nil
}
