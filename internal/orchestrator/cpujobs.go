package orchestrator

import "github.com/corral-sched/corral/internal/sched"

// Jobs without GPUs. A job that asks for no GPU (gpu_count 0) holds
// nothing the scheduler counts, so without a cap one user could have
// hundreds running on a node at once, taking its processes, memory and
// CPU from everyone else's jobs (issue 24: 191 ran, and five of them
// filled a node's pid space). Config.MaxRunningCPUJobsPerUser caps how
// many each user has running (allocating included); the core counts them
// from the snapshot's running jobs, and a job past the cap stays queued
// with reason user_cpu_job_limit (sched/cpujobs.go) until one of its
// user's ends.

// DefaultMaxRunningCPUJobsPerUser is --max-running-cpu-jobs-per-user's
// default: room for a user's data preparation, evaluation and notebook
// jobs beside their training, far from the hundreds that take a node's
// pids, memory and CPU.
const DefaultMaxRunningCPUJobsPerUser = 32

// snapshotCPUJobs gives the core the cap on each user's running jobs
// without GPUs.
func (o *Orchestrator) snapshotCPUJobs(snap *sched.Snapshot) {
	snap.CPUJobsPerUser = max(o.cfg.MaxRunningCPUJobsPerUser, 0)
}
