// Package reclaim takes GPUs back from interactive work left idle
// (docs/interactive.md). A running job of an interactive class is idle
// while no connection is attached to it (none open, and since the last
// one closed) and every GPU of it reads under its class's idle_threshold.
// Idle for idle_window (from the latest of its start, the last close, and
// its GPUs going quiet), it ends with reason idle through the
// preemption's sequence (the notice, SIGTERM, the grace, SIGKILL);
// idle_warn before, its owner is warned (IdleEndsAt, and the
// job.idle_warning notification). Use clears the warning. Batch idleness
// (idle_action) is separate.
//
// Books holds the classes' rules and when each job's GPUs went quiet; the
// orchestrator's loop walks its running jobs, asks Look what to do with
// each, and does it (the warning's row, the stop).
package reclaim

import (
	"fmt"
	"maps"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Default idle settings of the interactive classes; with a shorter
// maximum interactive time the window is half of it (Defaults).
const (
	defaultIdleThreshold = 5
	defaultIdleWindow    = time.Hour
	defaultIdleWarn      = 10 * time.Minute
)

// Interactive reports whether a job's class is one of the interactive
// classes (interactive, interactive-preemptible).
func Interactive(class string) bool {
	return class == api.ClassInteractive || class == api.ClassInteractivePreemptible
}

// Attachments tells how many connections (shells, the notebook proxy) are
// attached to a job and when the last one closed (*attach.Registry).
type Attachments interface {
	Attached(jobID string) (n int, lastClosed time.Time)
	Forget(jobID string)
}

// Books is the feature. Its memory of when each job's GPUs went under
// their threshold is not durable: after a restart the clock starts
// again, which only delays a reclaim.
type Books struct {
	maxTime    time.Duration // the server's longest interactive time (0: none)
	attach     Attachments   // nil: no connection is ever attached
	quietSince map[string]time.Time
}

// New returns the feature for a server whose interactive work lasts at
// most maxTime (0: no maximum), with its attach registry (nil: none).
func New(maxTime time.Duration, attach Attachments) *Books {
	return &Books{maxTime: maxTime, attach: attach, quietSince: map[string]time.Time{}}
}

// Defaults fills in the idle settings of the interactive classes that p
// does not set.
func (b *Books) Defaults(p *api.Policies) {
	window, warn := defaultIdleWindow, defaultIdleWarn
	if m := b.maxTime; m > 0 && window >= m {
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

// Apply applies the classes' idle updates to p (whose Classes it replaces
// with a changed copy), or names the first bad field.
func Apply(p *api.Policies, u map[string]api.ClassIdleUpdate) error {
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
			return api.Invalid("classes", "%q is not an interactive class (interactive, interactive-preemptible): batch idleness is idle_threshold, idle_window and idle_action", cut(class, 40))
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

// Check refuses idle settings that could never act before an interactive
// job's end: an idle_window not shorter than the maximum interactive
// time, or an idle_warn not shorter than the window.
func (b *Books) Check(p api.Policies) error {
	for _, class := range []string{api.ClassInteractive, api.ClassInteractivePreemptible} {
		c, ok := p.Classes[class]
		if !ok || c.IdleWindow == 0 {
			continue
		}
		field := "classes." + class
		if m := b.maxTime; m > 0 && c.IdleWindow.Duration() >= m {
			return api.Invalid(field+".idle_window", "is %s; it must be shorter than the longest an interactive job may run (--max-interactive-time %s)",
				c.IdleWindow.Duration(), m)
		}
		if c.IdleWarn.Duration() >= c.IdleWindow.Duration() {
			return api.Invalid(field+".idle_warn", "is %s; it must be shorter than idle_window (%s)", c.IdleWarn.Duration(), c.IdleWindow.Duration())
		}
	}
	return nil
}

// Verdict is what Look says of a running job.
type Verdict int

const (
	Skip    Verdict = iota // not reclaimable now (not interactive, ending, no window)
	InUse                  // in use: a warning it has is cleared
	Idle                   // idle, not yet for its window
	Warn                   // idle: warn its owner, it ends at ends
	Reclaim                // idle for its window: warn its owner if not yet, and end it
)

// Util reads the utilization of one GPU of a node (percent): node is
// false where the node is unknown, read where it has a reading of the GPU.
type Util func(nodeID string, gpu int) (pct int, node, read bool)

// Look says what to do with job j at now under its class's settings c,
// reading its GPUs' utilization through util; ends is when it ends if it
// stays idle. A job not yet warned (j.IdleEndsAt unset) is warned before
// it is reclaimed, in the same look if it must be both.
func (b *Books) Look(j *api.Job, c api.ClassIdle, now time.Time, util Util) (v Verdict, ends time.Time) {
	if !Interactive(j.Class) || j.Hold != "" {
		return Skip, time.Time{} // a hold's work runs outside Corral, never attached: its duration ends it
	}
	if j.State != api.StateRunning || j.CancelRequested || j.TimedOut || j.Preempting || c.IdleWindow == 0 {
		delete(b.quietSince, j.ID)
		return Skip, time.Time{}
	}
	since, idle := b.idleFrom(j, c, now, util)
	if !idle {
		return InUse, time.Time{}
	}
	ends = since.Add(c.IdleWindow.Duration()).UTC()
	switch {
	case !now.Before(ends):
		return Reclaim, ends
	case j.IdleEndsAt == nil && !now.Before(ends.Add(-c.IdleWarn.Duration())):
		return Warn, ends
	}
	return Idle, ends
}

// idleFrom returns since when job j has been idle, and false when it is
// in use now.
func (b *Books) idleFrom(j *api.Job, c api.ClassIdle, now time.Time, util Util) (time.Time, bool) {
	since := now
	if j.StartedAt != nil {
		since = *j.StartedAt
	}
	for _, a := range j.Allocation {
		pct, node, read := util(a.NodeID, a.GPUID)
		if !node {
			return time.Time{}, false
		}
		if !read || pct >= c.IdleThreshold { // working, or no reading: in use
			delete(b.quietSince, j.ID)
			return time.Time{}, false
		}
	}
	q, ok := b.quietSince[j.ID]
	if !ok {
		q = now
		b.quietSince[j.ID] = q
	}
	if q.After(since) {
		since = q
	}
	if b.attach != nil {
		n, last := b.attach.Attached(j.ID)
		if n > 0 {
			return time.Time{}, false
		}
		if last.After(since) {
			since = last
		}
	}
	return since, true
}

// Reclaimed forgets what was kept of a job being ended as idle.
func (b *Books) Reclaimed(id string) { delete(b.quietSince, id) }

// Notice is the preemption notice of a job ended as idle.
func Notice(now time.Time, c api.ClassIdle, grace time.Duration) string {
	return fmt.Sprintf("idle at %s: no connection attached and GPUs under %d%% for %s; ending (reason idle); SIGKILL in %s\n",
		now.Format(time.RFC3339), c.IdleThreshold, c.IdleWindow.Duration(), grace)
}

// Outcome is the final state of a job ended by idle reclaim.
func Outcome(code int) (api.State, string, string) {
	return api.StateCanceled, api.ReasonIdle, fmt.Sprintf("ended after being idle (no connection attached, GPUs under the class's idle_threshold) for its idle_window (exit code %d)", code)
}

// Moved forgets, once a job has ended, what the attach registry kept of
// its connections (feature.Mover).
func (b *Books) Moved(_ feature.Tx, j *api.Job, e api.Event) {
	if e.To.Terminal() && b.attach != nil {
		b.attach.Forget(j.ID)
	}
}

// cut shortens s to n bytes for an error message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
