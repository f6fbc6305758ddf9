package readview

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// QueuedRow is a queued job's row of GET /queue, from its view v (the job
// as the API shows it: its position, why it waits, its estimate's basis),
// when it last joined the queue, its plan (nil: none) and now.
func QueuedRow(v *api.Job, queuedAt time.Time, plan *sched.StartRange, now time.Time) api.QueuedJob {
	q := api.QueuedJob{
		ID: v.ID, Number: v.Number, Name: v.Name, User: v.User, Project: v.Project, Priority: v.Priority, RequestedGPUs: v.GPUCount * v.Nodes,
		Nodes: v.Nodes, QueuedAt: queuedAt, QueuePosition: v.QueuePosition, WaitedSeconds: now.Sub(queuedAt).Seconds(),
		PendingReason: v.PendingReason, PendingCause: v.PendingCause, PendingMessage: v.PendingMessage, RequestedGPUsMin: v.GPUCountMin,
		ArrayJobID: v.ArrayJobID, ArrayTaskID: v.ArrayTaskID, EstimatedDuration: v.EstimatedDuration, EstimateBasis: v.EstimateBasis,
	}
	if plan != nil {
		wait := max(plan.At.Sub(now).Seconds(), 0)
		q.EstimatedStartTime, q.EstimatedStartLow, q.EstimatedStartHigh = StartRange(*plan)
		q.EstimatedWaitTime = &wait
	}
	return q
}

// Unordered reports whether the rows' positions must be given anew by
// the policy's order over the queue as it is now. Positions are the last
// cycle's order; when some row has none (its job came after the cycle),
// or scheduling is stopped (running false), they are not. A task of an
// array takes its array's place, and a job held (held says by its
// pending reason, such as its dependencies) has no place in the order:
// neither asks for one.
func Unordered(rows []api.QueuedJob, running bool, held func(reason string) bool) bool {
	if !running {
		return len(rows) > 0
	}
	for i := range rows {
		if q := &rows[i]; q.QueuePosition == 0 && q.ArrayJobID == "" && !held(q.PendingReason) {
			return true
		}
	}
	return false
}

// Renumber gives each row its place in order (1 first); a row order does
// not hold gets 0.
func Renumber(rows []api.QueuedJob, order []sched.Job) {
	pos := make(map[string]int, len(order))
	for i, j := range order {
		pos[j.ID] = i + 1
	}
	for i := range rows {
		rows[i].QueuePosition = pos[rows[i].ID]
	}
}

// SortQueue orders GET /queue's rows: by position, then by when each
// joined the queue, then by id.
func SortQueue(rows []api.QueuedJob) {
	slices.SortFunc(rows, func(a, b api.QueuedJob) int {
		if a.QueuePosition != b.QueuePosition {
			return a.QueuePosition - b.QueuePosition
		}
		if c := a.QueuedAt.Compare(b.QueuedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Cursor reads a cursor of GET /queue: how many rows the pages before it
// held ("": none). Anything else than a count this server gave is a 422
// naming the field.
func Cursor(cursor string) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(cursor)
	if err != nil || n < 0 {
		return 0, api.Invalid("cursor", "is not a cursor this server gave (next_cursor)")
	}
	return n, nil
}

// OfUser keeps one user's rows of r, in their order, and the arrays of
// the rows kept; the statistics stay the whole queue's. The rows are a
// new slice (r's may be shared by a cache) and never nil.
func OfUser(r api.QueueResponse, user string) api.QueueResponse {
	rows := []api.QueuedJob{}
	arrays := map[string]bool{}
	for _, q := range r.QueuedJobs {
		if q.User == user {
			rows = append(rows, q)
			if q.ArrayJobID != "" {
				arrays[q.ArrayJobID] = true
			}
		}
	}
	r.QueuedJobs = rows
	var kept []api.Array
	for _, a := range r.Arrays {
		if arrays[a.ID] {
			kept = append(kept, a)
		}
	}
	r.Arrays = kept
	return r
}
