package history

import (
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Ops are the API's reads of the cluster over time: the dashboard's
// graphs (History), and the job counters and cycle durations that
// /metrics exports. The samples and the histogram have their own lock;
// the job counters also read the orchestrator's memory, under the loop's
// read lock.
type Ops struct {
	Books *Books
	Loop  feature.Loop
	// Live yields the jobs in the orchestrator's memory, in submission
	// order. Called with the loop's read lock held.
	Live func() iter.Seq[*api.Job]
	// Now is the orchestrator's clock.
	Now func() time.Time
}

// History averages the samples since q.Since into about q.Points steps,
// oldest first (Books.History).
func (o Ops) History(q Query) api.History { return o.Books.History(q, o.Now()) }

// JobCounters brings the counts of job events up to date with the jobs
// in memory and returns a copy.
func (o Ops) JobCounters() JobCounters {
	return feature.Read(o.Loop, func() JobCounters { return o.Books.JobCounters(o.Live(), o.Now()) })
}

// CycleDurations returns the histogram of scheduling-cycle durations.
func (o Ops) CycleDurations() Histogram { return o.Books.CycleDurations() }
