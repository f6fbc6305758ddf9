package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/notify"
)

// Idle reclaim of interactive work (docs/interactive.md). A running job of
// an interactive class is idle while no connection is attached to it (the
// attach registry: none open, and since the last one closed) and every GPU
// of it reads under its class's idle_threshold. Idle for idle_window (from
// the latest of its start, the last close, and its GPUs going quiet), it
// ends with reason idle through the preemption's sequence (the notice,
// SIGTERM, the grace, SIGKILL); idle_warn before, its owner is warned
// (IdleEndsAt, and the job.idle_warning notification). Use clears the
// warning. Batch idleness (checkIdle, idle_action) is separate and
// unchanged.

// Default idle settings of the interactive classes; with a shorter
// --max-interactive-time the window is half of it (classDefaults).
const (
	defaultIdleThreshold = 5
	defaultIdleWindow    = time.Hour
	defaultIdleWarn      = 10 * time.Minute
)

// idleBook is the loop's memory of when each interactive job's GPUs went
// under their threshold (not durable: after a restart the clock starts
// again, which only delays a reclaim).
type idleBook struct {
	quietSince map[string]time.Time
}

// classDefaults fills in the idle settings of the interactive classes that
// p does not set. Loop only.
func (o *Orchestrator) classDefaults(p *api.Policies) {
	window, warn := defaultIdleWindow, defaultIdleWarn
	if m := o.cfg.Limits.MaxInteractiveTime; m > 0 && window >= m {
		window = m / 2
		warn = min(warn, window/2)
	}
	if p.Classes == nil {
		p.Classes = map[string]api.ClassIdle{}
	}
	for _, c := range []string{api.ClassInteractive, api.ClassInteractivePreemptible} {
		if _, ok := p.Classes[c]; !ok {
			p.Classes[c] = api.ClassIdle{IdleThreshold: defaultIdleThreshold,
				IdleWindow: api.Seconds(window.Seconds()), IdleWarn: api.Seconds(warn.Seconds())}
		}
	}
}

// applyClasses applies the classes' idle updates to p (whose Classes it
// replaces with a changed copy), or names the first bad field.
func applyClasses(p *api.Policies, u map[string]api.ClassIdleUpdate) error {
	if len(u) == 0 {
		return nil
	}
	cs := maps.Clone(p.Classes)
	if cs == nil {
		cs = map[string]api.ClassIdle{}
	}
	for class, cu := range u {
		field := "classes." + class
		if !Interactive(class) {
			return api.Invalid("classes", "%q is not an interactive class (interactive, interactive-preemptible): batch idleness is idle_threshold, idle_window and idle_action", truncate(class, 40))
		}
		c := cs[class]
		if cu.IdleThreshold != nil {
			if *cu.IdleThreshold < 0 || *cu.IdleThreshold > 100 {
				return api.Invalid(field+".idle_threshold", "must be a percentage between 0 and 100")
			}
			c.IdleThreshold = *cu.IdleThreshold
		}
		for _, d := range []struct {
			name string
			raw  api.RawValue
			dst  *api.Seconds
		}{{"idle_window", cu.IdleWindow, &c.IdleWindow}, {"idle_warn", cu.IdleWarn, &c.IdleWarn}} {
			if api.IsNull(d.raw) {
				continue
			}
			v, err := api.ParseSecondsJSON(d.raw)
			if err != nil {
				return api.Invalid(field+"."+d.name, "%s", err.Error())
			}
			if v < 0 || v.Duration() > 7*24*time.Hour {
				return api.Invalid(field+"."+d.name, "must be between 0 and 168h")
			}
			*d.dst = v
		}
		cs[class] = c
	}
	p.Classes = cs
	return nil
}

// checkClasses refuses idle settings that could never act before an
// interactive job's end: an idle_window not shorter than
// --max-interactive-time, or an idle_warn not shorter than the window.
func (o *Orchestrator) checkClasses(p api.Policies) error {
	for _, class := range []string{api.ClassInteractive, api.ClassInteractivePreemptible} {
		c, ok := p.Classes[class]
		if !ok || c.IdleWindow == 0 {
			continue
		}
		field := "classes." + class
		if m := o.cfg.Limits.MaxInteractiveTime; m > 0 && c.IdleWindow.Duration() >= m {
			return api.Invalid(field+".idle_window", "is %s; it must be shorter than the longest an interactive job may run (--max-interactive-time %s)",
				c.IdleWindow.Duration(), m)
		}
		if c.IdleWarn.Duration() >= c.IdleWindow.Duration() {
			return api.Invalid(field+".idle_warn", "is %s; it must be shorter than idle_window (%s)", c.IdleWarn.Duration(), c.IdleWindow.Duration())
		}
	}
	return nil
}

// idleFrom returns since when job j has been idle by its class's settings,
// and false when it is in use now. Loop only, lock held.
func (o *Orchestrator) idleFrom(j *api.Job, c api.ClassIdle, now time.Time) (time.Time, bool) {
	since := now
	if j.StartedAt != nil {
		since = *j.StartedAt
	}
	for _, a := range j.Allocation {
		i, ok := o.nodeIndex[a.NodeID]
		if !ok {
			return time.Time{}, false
		}
		quiet := false
		for _, r := range o.nodes[i].readings {
			if r.Index == a.GPUID {
				quiet = r.Utilization < c.IdleThreshold
				break
			}
		}
		if !quiet { // working, or no reading: in use
			delete(o.inter.quietSince, j.ID)
			return time.Time{}, false
		}
	}
	if o.inter.quietSince == nil {
		o.inter.quietSince = map[string]time.Time{}
	}
	q, ok := o.inter.quietSince[j.ID]
	if !ok {
		q = now
		o.inter.quietSince[j.ID] = q
	}
	if q.After(since) {
		since = q
	}
	if o.cfg.Attach != nil {
		n, last := o.cfg.Attach.Attached(j.ID)
		if n > 0 {
			return time.Time{}, false
		}
		if last.After(since) {
			since = last
		}
	}
	return since, true
}

// checkInteractiveIdle warns, then ends, idle interactive jobs. Loop only.
func (o *Orchestrator) checkInteractiveIdle(ctx context.Context) {
	now := o.cfg.Now()
	o.mu.Lock()
	tx := o.begin()
	for id := range o.active {
		j := o.jobs[id]
		if !Interactive(j.Class) || j.Hold != "" {
			continue // a hold's work runs outside Corral, never attached: its duration ends it (holds.go)
		}
		c := o.policy.Classes[j.Class]
		if j.State != api.StateRunning || j.CancelRequested || j.TimedOut || j.Preempting || c.IdleWindow == 0 {
			delete(o.inter.quietSince, id)
			continue
		}
		since, idle := o.idleFrom(j, c, now)
		if !idle {
			if j.IdleEndsAt != nil {
				j.IdleEndsAt = nil
				tx.touch(j)
				o.log.Info("interactive job in use again", "job_id", id)
			}
			continue
		}
		ends := since.Add(c.IdleWindow.Duration()).UTC()
		if j.IdleEndsAt == nil && !now.Before(ends.Add(-c.IdleWarn.Duration())) {
			j.IdleEndsAt = &ends
			tx.touch(j)
			o.notes.Job(j, notify.JobIdleWarning, now)
			o.log.Warn("interactive job idle: it ends unless used", "job_id", id, "user", j.User, "ends_at", ends)
		}
		if now.Before(ends) {
			continue
		}
		o.reclaimIdle(ctx, tx, j, c)
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	if err != nil {
		o.log.Error("idle reclaim not committed", "err", err)
		return
	}
	o.runAfter(ctx, tx)
}

// reclaimIdle ends an idle interactive job as a preemption would stop it:
// the notice, SIGTERM, its grace, SIGKILL; it ends canceled with reason
// idle (exitOutcome). Lock held, in tx.
func (o *Orchestrator) reclaimIdle(ctx context.Context, tx *txn, j *api.Job, c api.ClassIdle) {
	j.IdleReclaimed, j.CancelRequested = true, true
	if j.IdleEndsAt == nil {
		t := tx.now
		j.IdleEndsAt = &t
	}
	tx.touch(j)
	delete(o.inter.quietSince, j.ID)
	grace := o.policy.PreemptGrace.Duration()
	if j.PreemptGrace != nil {
		grace = j.PreemptGrace.Duration()
	}
	id, attempt := j.ID, j.RetryCount
	notice := fmt.Sprintf("idle at %s: no connection attached and GPUs under %d%% for %s; ending (reason idle); SIGKILL in %s\n",
		tx.now.Format(time.RFC3339), c.IdleThreshold, c.IdleWindow.Duration(), grace)
	o.log.Info("idle interactive job ending", "job_id", id, "user", j.User, "grace", grace)
	tx.after = append(tx.after, func() {
		ctx := context.WithoutCancel(ctx)
		if n, ok := o.cfg.Executor.(exec.Noticer); ok {
			if err := n.Notice(ctx, id, attempt, notice); err != nil {
				o.log.Warn("idle notice not written", "job_id", id, "err", err)
			}
		}
		if err := o.cfg.Executor.Stop(ctx, id, attempt, grace); err != nil {
			o.log.Error("stop idle job", "job_id", id, "err", err)
		}
	})
}

// idleOutcome is the final state of a job ended by idle reclaim.
func idleOutcome(j *api.Job, code int) (api.State, string, string) {
	return api.StateCanceled, api.ReasonIdle, fmt.Sprintf("ended after being idle (no connection attached, GPUs under the class's idle_threshold) for its idle_window (exit code %d)", code)
}
