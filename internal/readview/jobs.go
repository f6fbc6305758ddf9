package readview

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// JobFilter selects jobs for GET /jobs. Zero fields match everything.
type JobFilter struct {
	State   api.State
	User    string
	Project string
	Name    string    // the job's name, exactly
	Since   time.Time // submitted at or after
	Until   time.Time // submitted before
	Cursor  string    // only jobs whose ids sort before it (the last page's next cursor)
	Limit   int       // at most this many, newest first; 0: 1000
}

// Match reports whether f selects j.
func (f *JobFilter) Match(j *api.Job) bool {
	return (f.Cursor == "" || j.ID < f.Cursor) && (f.State == "" || j.State == f.State) &&
		(f.User == "" || j.User == f.User) && (f.Project == "" || j.Project == f.Project) &&
		(f.Name == "" || j.Name == f.Name) && !j.SubmittedAt.Before(f.Since) &&
		(f.Until.IsZero() || j.SubmittedAt.Before(f.Until))
}

// Live copies a job in memory for the API: its env, allocation (empty,
// not null) and, when asked for, its events copied, since the loop goes
// on changing the job; policy is the scheduling policy in force.
func Live(j *api.Job, policy string, withEvents bool) api.Job {
	v := *j
	v.Env = maps.Clone(j.Env)
	v.Allocation = slices.Clone(j.Allocation)
	if v.Allocation == nil {
		v.Allocation = []api.Allocation{}
	}
	v.Events = nil
	v.Policy = policy
	if withEvents {
		v.Events = slices.Clone(j.Events)
	}
	return v
}

// SchedulingStopped is why every queued job waits while an admin has
// stopped scheduling.
const SchedulingStopped = "scheduling_stopped"

// Pending finishes why a queued job's view v waits: while scheduling is
// stopped (stopped), that is why, whatever else holds it; then the
// precise reason goes to PendingCause and PendingReason gets the one
// clients before the reasons were split read (api.PendingReasonOf).
func Pending(v *api.Job, stopped bool) {
	if stopped {
		v.PendingReason, v.PendingMessage = SchedulingStopped, "the orchestrator is stopped: nothing new starts until an admin runs corral orchestrator start"
	}
	v.PendingCause, v.PendingReason = v.PendingReason, api.PendingReasonOf(v.PendingReason)
}

// ByID sorts views by id: ids are ULIDs, so their order is the
// submission order.
func ByID(jobs []api.Job) {
	slices.SortFunc(jobs, func(a, b api.Job) int { return strings.Compare(a.ID, b.ID) })
}
