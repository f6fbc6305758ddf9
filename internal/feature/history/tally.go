package history

import (
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// WaitBuckets are the upper bounds, in seconds, of the wait-time histogram
// of JobCounters: how long jobs waited in the queue before they started.
var WaitBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400}

// JobCounters are cumulative counts of job transitions, read from the jobs'
// events (all of them, those recovered from the store included).
type JobCounters struct {
	Starts     uint64               // transitions to running
	Ended      map[api.State]uint64 // transitions to completed, failed, canceled
	WaitCounts []uint64             // per WaitBuckets bound, cumulative (Prometheus style)
	WaitSum    float64              // seconds
	WaitCount  uint64
}

// tally reads new events of every job, once each. The history's lock
// guards it; the orchestrator's read lock is held while it advances.
type tally struct {
	seen map[string]int // events already counted, per job
	c    JobCounters
}

// interval is what advance saw after a time: the counts of one history
// sample.
type interval struct {
	started, completed, failed int32
	waitSum, waitMax           float64
}

// advance counts the events added since the last call to the jobs (ended
// jobs were counted as they left memory: Gone). Events after since also
// go into the returned interval. History lock held.
func (t *tally) advance(jobs iter.Seq[*api.Job], since time.Time) interval {
	var iv interval
	for j := range jobs {
		t.job(j, since, &iv)
	}
	return iv
}

// job counts j's events added since the last call; those after since
// also go into iv.
func (t *tally) job(j *api.Job, since time.Time, iv *interval) {
	if t.seen == nil {
		t.seen = map[string]int{}
		t.c.Ended = map[api.State]uint64{}
		t.c.WaitCounts = make([]uint64, len(WaitBuckets))
	}
	{
		id := j.ID
		from := t.seen[id]
		if from == len(j.Events) {
			return
		}
		for i := from; i < len(j.Events); i++ {
			e := j.Events[i]
			recent := e.At.After(since)
			switch {
			case e.To == api.StateRunning:
				wait := max(e.At.Sub(queuedBefore(j, i)).Seconds(), 0)
				t.c.Starts++
				t.c.WaitSum += wait
				t.c.WaitCount++
				for b, le := range WaitBuckets {
					if wait <= le {
						t.c.WaitCounts[b]++
					}
				}
				if recent {
					iv.started++
					iv.waitSum += wait
					iv.waitMax = max(iv.waitMax, wait)
				}
			case e.To.Terminal():
				t.c.Ended[e.To]++
				if recent && e.To == api.StateCompleted {
					iv.completed++
				} else if recent {
					iv.failed++
				}
			}
		}
		t.seen[id] = len(j.Events)
	}
}

// queuedBefore is when the job was last queued before its event i.
func queuedBefore(j *api.Job, i int) time.Time {
	for k := i - 1; k >= 0; k-- {
		if j.Events[k].To == api.StateQueued {
			return j.Events[k].At
		}
	}
	return j.SubmittedAt
}

// merge adds another interval's counts.
func (iv *interval) merge(o interval) {
	iv.started += o.started
	iv.completed += o.completed
	iv.failed += o.failed
	iv.waitSum += o.waitSum
	iv.waitMax = max(iv.waitMax, o.waitMax)
}

// JobCounters brings the counts up to date with jobs (as Take) and
// returns a copy.
func (h *Books) JobCounters(jobs iter.Seq[*api.Job], now time.Time) JobCounters {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.catchUp(jobs, now.UTC())
	c := h.tally.c
	c.Ended = maps.Clone(c.Ended)
	c.WaitCounts = slices.Clone(c.WaitCounts)
	if c.Ended == nil {
		c.Ended = map[api.State]uint64{}
		c.WaitCounts = make([]uint64, len(WaitBuckets))
	}
	return c
}

// Gone counts the events of jobs about to leave the orchestrator's
// memory that the tally has not seen yet, into the next sample, and
// forgets them.
func (h *Books) Gone(jobs []*api.Job, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	since := h.last
	if since.IsZero() {
		since = now.Add(-Interval)
	}
	var iv interval
	for _, j := range jobs {
		h.tally.job(j, since, &iv)
		delete(h.tally.seen, j.ID)
	}
	h.pending.merge(iv)
}

// CycleBuckets are the upper bounds, in seconds, of the histogram of
// scheduling-cycle durations.
var CycleBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// Histogram is a cumulative histogram over fixed bounds.
type Histogram struct {
	Counts []uint64 // per bound: observations at or under it
	Sum    float64
	Count  uint64
}

func (h *Histogram) observe(bounds []float64, v float64) {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(bounds))
	}
	for i, le := range bounds {
		if v <= le {
			h.Counts[i]++
		}
	}
	h.Sum += v
	h.Count++
}

// ObserveCycle records a scheduling cycle's duration.
func (h *Books) ObserveCycle(d time.Duration) {
	h.mu.Lock()
	h.cycles.observe(CycleBuckets, d.Seconds())
	h.mu.Unlock()
}

// CycleDurations returns the histogram of scheduling-cycle durations.
func (b *Books) CycleDurations() Histogram {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.cycles
	h.Counts = slices.Clone(h.Counts)
	if h.Counts == nil {
		h.Counts = make([]uint64, len(CycleBuckets))
	}
	return h
}
