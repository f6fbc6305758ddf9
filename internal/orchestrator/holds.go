package orchestrator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// Holds as interactive allocations (docs/interactive.md). A hold granted
// at once stays what it was (GPUs in the books under its name, for work
// outside Corral) and gains an expiry; it counts in fair share while it
// lasts (snapshot: holdsRunning) and in usage when it ends (releaseHold),
// and the why-pending of jobs waiting for GPUs names it (holdNote). A hold
// asked with "wait": true that cannot be granted now is queued as an
// interactive job whose process only sleeps for the hold's duration: it
// waits, starts, is counted and ends like any job, and its job id is the
// hold's id from then on.

// holdProject is the project a hold's GPU time counts against (holds
// name no project).
const holdProject = "default"

// holdDuration is a hold's duration from the request: the server's
// MaxInteractiveTime by default and at most (0: no maximum, and 8h by
// default).
func (o *Orchestrator) holdDuration(raw api.RawValue) (time.Duration, error) {
	max := o.cfg.Limits.MaxInteractiveTime
	d := max
	if d <= 0 {
		d = DefaultMaxInteractiveTime
	}
	if !api.IsNull(raw) {
		s, err := api.ParseSecondsJSON(raw)
		if err != nil {
			return 0, api.Invalid("duration", "%s", err.Error())
		}
		if s.Duration() < time.Second {
			return 0, api.Invalid("duration", "must be at least 1s")
		}
		if max > 0 && s.Duration() > max {
			return 0, api.Invalid("duration", "is %s; a hold may last at most %s on this server (--max-interactive-time)", s.Duration(), max)
		}
		d = s.Duration()
	}
	return d, nil
}

// checkHoldCap refuses a hold that would take its user's interactive GPUs
// past MaxInteractiveGPUs. Only holds asked with "wait" are refused by it
// (such a hold may become an interactive job); a hold without wait keeps
// the route's old answers (201 or 409), yet counts toward the cap of the
// user's later interactive work. Loop only.
func (o *Orchestrator) checkHoldCap(user string, n int) error {
	l := o.cfg.Limits.MaxInteractiveGPUs
	if have := o.interactiveGPUs(user); l > 0 && have+n > l {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "interactive_gpus_exceeded", Field: "gpu_count",
			Message: fmt.Sprintf("%s has %d interactive GPUs queued, running or held; %d more would pass --max-interactive-gpus (%d per user)",
				user, have, n, l)}
	}
	return nil
}

// queueHold queues a hold that waits as an interactive job sleeping for
// its duration. Loop only, in tx.
func (o *Orchestrator) queueHold(tx *txn, req api.AllocateRequest, user string, d time.Duration) (api.Hold, error) {
	n := req.GPUCount
	secs := int64(d / time.Second)
	sreq := api.SubmitRequest{Name: req.JobID, User: user, Command: "sleep " + strconv.FormatInt(secs, 10),
		GPUCount: &n, GPUMemoryGB: req.MemoryGB, GPUType: req.GPUType, Class: api.ClassInteractive,
		TimeLimit: api.RawValue(strconv.Quote(d.String()))}
	r, err := o.submit(tx, &sreq, "", false)
	if err != nil {
		return api.Hold{}, err
	}
	j := o.jobs[r.job.ID]
	j.Hold = req.JobID
	// The process ends the hold at its duration; the time limit, a minute
	// later, is a backstop.
	limit := api.Seconds((d + time.Minute).Seconds())
	j.TimeLimit = &limit
	o.log.Info("hold queued", "hold", req.JobID, "job_id", j.ID, "gpus", n, "duration", d)
	return api.Hold{JobID: j.ID, Name: req.JobID, User: user, HeldAt: tx.now, Allocation: []api.Allocation{},
		Queued: true, Poll: "/queue/" + j.ID}, nil
}

// holdJob returns the job a queued hold became, if id is one. Lock held.
func (o *Orchestrator) holdJob(id string) *api.Job {
	if j := o.jobs[id]; j != nil && j.Hold != "" {
		return j
	}
	return nil
}

// releaseHoldJob ends a hold that is a job: canceled like any job.
func (o *Orchestrator) releaseHoldJob(ctx context.Context, id string) (api.Hold, error) {
	j, _, err := o.Cancel(ctx, id, 0)
	if err != nil {
		return api.Hold{}, err
	}
	now := o.cfg.Now().UTC()
	return api.Hold{JobID: j.ID, Name: j.Hold, User: j.User, HeldAt: j.SubmittedAt, ReleasedAt: &now, Allocation: j.Allocation}, nil
}

// holdExpiry is when a hold ends: its ExpiresAt, or, for a hold made
// before holds expired, MaxInteractiveTime after it was taken (zero: never).
func (o *Orchestrator) holdExpiry(h *api.Hold) time.Time {
	if h.ExpiresAt != nil {
		return *h.ExpiresAt
	}
	if d := o.cfg.Limits.MaxInteractiveTime; d > 0 {
		return h.HeldAt.Add(d)
	}
	return time.Time{}
}

// releaseHold frees a hold's GPUs in tx and charges its GPU time to its
// user's usage. Loop only.
func (o *Orchestrator) releaseHold(tx *txn, h *api.Hold) api.Hold {
	for _, a := range h.Allocation {
		k := gpuKey{a.NodeID, a.GPUID}
		if o.owner[k] == h.JobID {
			delete(o.owner, k)
		}
	}
	delete(o.holds, h.JobID)
	tx.batch.DeleteHolds = append(tx.batch.DeleteHolds, h.JobID)
	o.dirty = true
	if held := tx.now.Sub(h.HeldAt); held > 0 {
		o.chargeHold(tx, h.User, float64(len(h.Allocation))*held.Seconds()) // holdusage.go
		o.chargeHoldUsage(tx, h, "released")                                // usage.go
	}
	out := *h
	now := tx.now
	out.ReleasedAt = &now
	return out
}

// checkHolds ends every hold past its expiry. Loop only.
func (o *Orchestrator) checkHolds(ctx context.Context) {
	now := o.cfg.Now()
	o.mu.Lock()
	var due []*api.Hold
	for _, h := range o.holds {
		if at := o.holdExpiry(h); !at.IsZero() && !now.Before(at) {
			due = append(due, h)
		}
	}
	if len(due) == 0 {
		o.mu.Unlock()
		return
	}
	tx := o.begin()
	for _, h := range due {
		o.releaseHold(tx, h)
		o.log.Info("hold expired; GPUs released", "hold", h.JobID, "user", h.User)
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("hold expiry not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// holdsRunning adds the holds to the core's running jobs: they count in
// quotas and fair share like interactive jobs (never preempted), and the
// plan sees when they end. Lock held.
func (o *Orchestrator) holdsRunning(rs []sched.Running, now time.Time) []sched.Running {
	for _, h := range o.holds {
		r := sched.Running{ID: h.JobID, User: h.User, Project: holdProject, Priority: int(api.PriorityNormal),
			StartedAt: h.HeldAt, SubmittedAt: h.HeldAt, Class: sched.ClassInteractive}
		if at := o.holdExpiry(h); !at.IsZero() {
			r.Estimate = max(at.Sub(h.HeldAt), now.Sub(h.HeldAt))
		}
		for _, a := range h.Allocation {
			if n := len(r.Placements); n > 0 && r.Placements[n-1].NodeID == a.NodeID {
				r.Placements[n-1].GPUs = append(r.Placements[n-1].GPUs, a.GPUID)
				continue
			}
			r.Placements = append(r.Placements, sched.Placement{NodeID: a.NodeID, GPUs: []int{a.GPUID}})
		}
		rs = append(rs, r)
	}
	return rs
}

// holdNote names, in the why-pending of a job waiting for GPUs, the holds
// that keep GPUs from it (at most three). Lock held.
func (o *Orchestrator) holdNote(v *api.Job) {
	if len(o.holds) == 0 || v.State != api.StateQueued {
		return
	}
	switch v.PendingReason {
	case sched.ReasonResources, sched.ReasonBackfillReserved, sched.ReasonBooking, sched.ReasonBehindHead:
	default:
		return
	}
	ids := make([]string, 0, len(o.holds))
	for id := range o.holds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var parts []string
	for _, id := range ids {
		if len(parts) == 3 {
			parts = append(parts, fmt.Sprintf("and %d more holds", len(ids)-3))
			break
		}
		h := o.holds[id]
		until := ""
		if at := o.holdExpiry(h); !at.IsZero() {
			until = " until " + at.UTC().Format("15:04 UTC")
		}
		owner := h.User
		if owner == "" {
			owner = "someone"
		}
		parts = append(parts, fmt.Sprintf("%s held by %s's hold %s%s", holdGPUs(h.Allocation), owner, h.JobID, until))
	}
	v.PendingMessage += "; " + strings.Join(parts, "; ")
}

// holdGPUs says which GPUs an allocation takes: "GPUs 0-1 on node-1".
func holdGPUs(as []api.Allocation) string {
	var out []string
	for i := 0; i < len(as); {
		k := i
		var idx []int
		for ; k < len(as) && as[k].NodeID == as[i].NodeID; k++ {
			idx = append(idx, as[k].GPUID)
		}
		out = append(out, "GPU"+plural(len(idx))+" "+ranges(idx)+" on "+as[i].NodeID)
		i = k
	}
	return strings.Join(out, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ranges writes sorted indexes as runs: 0-1,4.
func ranges(idx []int) string {
	slices.Sort(idx)
	var b strings.Builder
	for i := 0; i < len(idx); {
		k := i
		for k+1 < len(idx) && idx[k+1] == idx[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if k > i {
			b.WriteString("-" + strconv.Itoa(idx[k]))
		}
		i = k + 1
	}
	return b.String()
}
