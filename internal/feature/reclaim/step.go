package reclaim

import (
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
)

// Loop is what idle reclaim reads and asks of the loop at its tick: the
// running work, the classes' idle settings, the preemption grace, and
// the GPUs' readings.
type Loop interface {
	feature.Running
	Cluster
}

// Cluster is what idle reclaim reads of the books at its tick, besides
// the running work. Lock held.
type Cluster interface {
	// Class is the idle settings of the class named name.
	Class(name string) api.ClassIdle
	// PreemptGrace is the policy's grace of a preempted job.
	PreemptGrace() time.Duration
	// Util reads a GPU's last utilization.
	Util(nodeID string, gpu int) (pct int, node, read bool)
}

// Noter is what idle reclaim tells the notifications feature.
type Noter interface {
	Job(j *api.Job, k notify.Kind, at time.Time)
}

// Tick is idle reclaim's timed work (feature.RunningTicker): Step, each
// tick, in a transaction of the loop's.
type Tick struct {
	Books   *Books
	Cluster Cluster
	Notes   Noter
	Now     func() time.Time // the orchestrator's clock, read at each tick
	Log     *slog.Logger
}

// TickRunning steps at Now over the running work run. It reports true
// whether or not a job changed: the tick's transaction is always
// committed, and the commit's features run (ended jobs leave memory).
func (t Tick) TickRunning(tx feature.Tx, run feature.Running) bool {
	t.Books.Step(tx, t.Now(), tickLoop{run, t.Cluster}, t.Notes, t.Log)
	return true
}

// TickName names idle reclaim's tick in the log.
func (t Tick) TickName() string { return "idle reclaim" }

// tickLoop is the running work of one tick with the books' Cluster.
type tickLoop struct {
	feature.Running
	Cluster
}

// Step warns, then ends, idle interactive jobs at now, in tx: a warning
// (IdleEndsAt and the job.idle_warning notification) idle_warn before
// the end, cleared by use; at the end, the stop as a preemption's (the
// notice, SIGTERM, the grace, SIGKILL), after which the job ends
// canceled with reason idle (Outcome).
func (b *Books) Step(tx feature.Tx, now time.Time, loop Loop, notes Noter, log *slog.Logger) {
	for j := range loop.Active() {
		c := loop.Class(j.Class)
		v, ends := b.Look(j, c, now, loop.Util)
		switch v {
		case InUse:
			if j.IdleEndsAt != nil {
				j.IdleEndsAt = nil
				loop.Touch(tx, j)
				log.Info("interactive job in use again", "job_id", j.ID)
			}
			continue
		case Warn, Reclaim:
			if j.IdleEndsAt == nil {
				j.IdleEndsAt = &ends
				loop.Touch(tx, j)
				notes.Job(j, notify.JobIdleWarning, now)
				log.Warn("interactive job idle: it ends unless used", "job_id", j.ID, "user", j.User, "ends_at", ends)
			}
		}
		if v == Reclaim {
			b.reclaim(tx, j, c, loop, log)
		}
	}
}

// reclaim ends an idle interactive job as a preemption would stop it.
func (b *Books) reclaim(tx feature.Tx, j *api.Job, c api.ClassIdle, loop Loop, log *slog.Logger) {
	j.IdleReclaimed, j.CancelRequested = true, true
	if j.IdleEndsAt == nil {
		t := tx.Now()
		j.IdleEndsAt = &t
	}
	loop.Touch(tx, j)
	b.Reclaimed(j.ID)
	grace := loop.PreemptGrace()
	if j.PreemptGrace != nil {
		grace = j.PreemptGrace.Duration()
	}
	log.Info("idle interactive job ending", "job_id", j.ID, "user", j.User, "grace", grace)
	loop.Stop(tx, j, grace, Notice(tx.Now(), c, grace), "stop idle job")
}
