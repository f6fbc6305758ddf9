// Package cpujobs caps each user's running jobs without GPUs. A job that
// asks for no GPU holds nothing the scheduler counts, so without a cap
// one user could have hundreds running on a node at once, taking its
// processes, memory and CPU from everyone else's jobs (191 ran in one
// test, and five of them filled a node's pid space). The core counts each
// user's running jobs without GPUs (allocating included) from the
// snapshot, and a job past the cap stays queued with reason
// user_cpu_job_limit (sched/cpujobs.go) until one of its user's ends.
package cpujobs

import (
	"time"

	"github.com/corral-sched/corral/internal/sched"
)

// DefaultMaxPerUser is --max-running-cpu-jobs-per-user's default: room
// for a user's data preparation, evaluation and notebook jobs beside
// their training, far from the hundreds that take a node's pids, memory
// and CPU.
const DefaultMaxPerUser = 32

// Cap is the feature (feature.SnapshotPart): at most MaxPerUser running
// jobs without GPUs per user; 0 or less, no cap.
type Cap struct{ MaxPerUser int }

// AddToSnapshot gives the core the cap.
func (c Cap) AddToSnapshot(snap *sched.Snapshot, _ time.Time) {
	snap.CPUJobsPerUser = max(c.MaxPerUser, 0)
}
