package jobbook

import (
	"time"

	"github.com/corral-sched/corral/internal/sched"
)

// Pending is what the last cycles said of each queued job: why it waits
// (a list, and each job's index in it: a map of the reasons themselves
// cost a cycle 27-41 ms at 100,000 queued jobs to fill, each value moved
// into the map's groups, one of indexes about 4 ms), and when it may
// start, from the last plan (a large queue is planned less often than it
// is scheduled). The zero value is empty and ready. Like the Book, it has
// no lock of its own.
type Pending struct {
	list    []sched.Pending
	at      map[string]int32
	plan    map[string]sched.StartRange
	planned time.Time
}

// Reset replaces the reasons with ps, which the book keeps. The index map
// is reused unless the queue has shrunk a lot (a map keeps its size).
func (b *Pending) Reset(ps []sched.Pending) {
	if b.at == nil || len(ps) < len(b.at)/4 {
		b.at = make(map[string]int32, len(ps))
	} else {
		clear(b.at)
	}
	b.list = ps
	for i := range ps {
		b.at[ps[i].JobID] = int32(i)
	}
}

// Get returns why job id waits.
func (b *Pending) Get(id string) (sched.Pending, bool) {
	i, ok := b.at[id]
	if !ok {
		return sched.Pending{}, false
	}
	return b.list[i], true
}

// Plan replaces the estimated starts with plan, made at now.
func (b *Pending) Plan(plan map[string]sched.StartRange, now time.Time) {
	b.plan, b.planned = plan, now
}

// Planned is when the last plan was made (zero: never).
func (b *Pending) Planned() time.Time { return b.planned }

// Start returns job id's estimated start range, from the last plan.
func (b *Pending) Start(id string) (sched.StartRange, bool) {
	sr, ok := b.plan[id]
	return sr, ok
}

// Drop forgets job id's reason and estimated start.
func (b *Pending) Drop(id string) {
	delete(b.at, id)
	delete(b.plan, id)
}
