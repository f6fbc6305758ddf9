package jobbook

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// SchedJob is a queued job as the core sees it, from the job alone: who
// and what it asks (whole GPUs, a MIG profile or an MPS share), its GPU
// time of earlier attempts, the earliest it may start (a requeue's
// backoff, sbatch's --begin) and, for an elastic job, its minimum and when
// its wait for the maximum ends. What others know of it (its run-time
// estimate, its booking) the caller adds.
func SchedJob(j *api.Job) sched.Job {
	sj := sched.Job{
		ID: j.ID, User: j.User, Project: j.Project, Priority: int(j.Priority), SubmittedAt: j.SubmittedAt,
		GPUs: j.GPUCount, Nodes: j.Nodes, MinMemoryMiB: int64(j.GPUMemoryGB * 1024), GPUType: j.GPUType,
		NodeLabels: j.NodeLabels, Class: j.Class,
		MIGProfile: j.MIGProfile, ShareMiB: j.GPUShareMiB, ShareCompute: j.GPUCompute, // a part of a GPU (package gpushare)
	}
	sj.Attained = time.Duration(j.GPUSeconds * float64(time.Second)) // its earlier attempts' GPU time
	if j.NotBefore != nil {
		sj.NotBefore = *j.NotBefore
	}
	if j.Begin != nil && j.Begin.After(sj.NotBefore) { // sbatch --begin (package jobio)
		sj.NotBefore, sj.Begin = *j.Begin, true
	}
	if j.GPUCountMin > 0 { // elastic: its minimum, and when its wait for the maximum ends
		sj.GPUsMin, sj.ElasticUntil = j.GPUCountMin, j.SubmittedAt
		if j.ElasticWait != nil {
			sj.ElasticUntil = j.SubmittedAt.Add(j.ElasticWait.Duration())
		}
	}
	return sj
}

// QueuedAt is when the job last entered the queue: its submission, or
// its latest requeue.
func QueuedAt(j *api.Job) time.Time {
	if t := j.LastEntered(api.StateQueued); !t.IsZero() {
		return t
	}
	return j.SubmittedAt
}

// SchedRunning is an active job as the core sees it, from the job alone:
// who, its placements, since when it runs (now, when it has not started
// yet), and what makes it a victim or not (borrowed GPUs, a preemption
// under way, idleness, its class). Its run-time estimate the caller adds.
func SchedRunning(j *api.Job, now time.Time) sched.Running {
	started := now
	if j.StartedAt != nil {
		started = *j.StartedAt
	}
	return sched.Running{ID: j.ID, User: j.User, Project: j.Project, Priority: int(j.Priority),
		Placements: sched.PlacementsOf(j.Allocation), StartedAt: started, SubmittedAt: j.SubmittedAt, Borrowed: j.Borrowed, Preempting: j.Preempting,
		Idle: j.Idle, Class: j.Class}
}
