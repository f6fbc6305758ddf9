package orchestrator

import (
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/attach"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store"
)

// Config is what an Orchestrator needs. Store, Executor and Nodes are
// required.
type Config struct {
	Store Store
	// Log is what batches are committed to and the state is loaded from
	// at start-up; nil: Store. A test wraps Store in it to see every
	// batch the loop commits (golden_test.go); the other reads (ended
	// jobs, usage, history) still go to Store.
	Log      store.Log
	Executor exec.Executor
	Nodes    []Node
	DataDir  string // logs go under DataDir/logs
	// Pools are the server's pools of nodes (agents, ray,
	// slurm); a job may ask for one of them. Empty: any pool name.
	Pools []string
	// Reap kills processes left behind by jobs whose server died (kill -9);
	// it is called at start-up with the ids of jobs the store says were
	// active, before they are requeued. Nil: nothing is reaped.
	Reap func(jobIDs map[string]bool) (int, error)
	// CancelGrace is how long a canceled job has between SIGTERM and
	// SIGKILL unless the request says otherwise. Default 10s.
	CancelGrace time.Duration
	// Tick is how often a scheduling cycle runs even when nothing changed,
	// and nodes are checked for silence. Default 5s (at most NodeTTL/4).
	Tick time.Duration
	// NodeTTL is how long a node may be silent before it is down and its
	// jobs are requeued. Default 30s.
	NodeTTL time.Duration
	// Clock is the server's own running clock, by which it notices its
	// stalls (liveness.go): default time.Now, whose monotonic reading
	// ignores steps of the wall clock. Tests set it to a fake.
	Clock func() time.Time
	// RetryBackoff is how long a job whose node was lost waits before its
	// first retry; it doubles with each further retry, up to 10 minutes.
	// Default 10s.
	RetryBackoff time.Duration
	// Limits bound what users may queue and run (package limits).
	Limits  Limits
	Now     func() time.Time // default time.Now
	Logger  *slog.Logger
	Version string

	// DependencyTimeout is how long a queued job whose depends_on can no
	// longer be met waits before it is canceled (package deps). 0: the default,
	// DefaultDependencyTimeout (24h); negative: at once.
	DependencyTimeout time.Duration

	// MaxLogSize is how many bytes of output the server stores per
	// attempt and rank from remote agents; the rest is dropped behind one
	// marker line (package joblogs). 0: no cap.
	MaxLogSize int64

	// Notify plans the notifications of each batch, written with it
	// (notify.go); nil: none.
	Notify Notifier
	// AlertGPUTemp is the GPU temperature (Celsius) that raises an admin
	// alert; 0: DefaultAlertGPUTemp.
	AlertGPUTemp int
	// AlertQueueWait raises an admin alert when the queue wait p95 stays
	// above it for QueueWaitFor (notify.go); 0: off.
	AlertQueueWait time.Duration

	// BookingAllowance is how many GPU-hours a user may book per ISO week
	// (admins are not bounded; 0: DefaultBookingAllowance; negative: users
	// may not book). PurgeAfter is how long after its start an unused
	// booking is released (0: DefaultPurgeAfter; negative: never). See
	// feature/bookings and docs/bookings.md.
	BookingAllowance float64
	PurgeAfter       time.Duration

	// NotebookMIG is the MIG profile a notebook gets by default: one that
	// asks for 1 GPU and no GPU type, memory, slice or share runs on a
	// slice of it while some GPU offers that profile (notebook.go);
	// empty: whole GPUs.
	NotebookMIG string

	// Attach counts the connections (shells, notebook proxy) attached to
	// each job, for idle reclaim of interactive work; nil: none are.
	Attach *attach.Registry

	// BudgetAction is what an exhausted budget with no action of its own
	// does: usage.ActionNotify (default), ActionPreemptible or ActionHold
	// (budgets.go).
	BudgetAction string

	// MaxRunningCPUJobsPerUser caps the jobs without GPUs one user may
	// have running at once (cpujobs.go). 0: no cap.
	MaxRunningCPUJobsPerUser int

	// Seams for tests that step the loop one event at a time under a fake
	// clock (golden_test.go); the server leaves them nil.
	//
	// NewID makes the id of a new job or job array at now. Ids must sort
	// after every id made before (the queue's order relies on it). Nil:
	// "j" and a lowercase ULID of now with random entropy.
	NewID func(now time.Time) string
	// Ticks, when set, replaces the loop's ticker of period Tick: the loop
	// does its tick's work (nodes' silence, holds, bookings, time limits,
	// heartbeat, then a cycle) once per value received. Nil: a real ticker.
	Ticks <-chan time.Time
	// Idle, when set, is called by the loop each time it has done all it
	// can (ops, reports, a due cycle, their executor calls) and is about
	// to wait for its next event. It must not block or call the
	// orchestrator. Nil: nothing is called.
	Idle func()
}
