package jobbook

import "github.com/corral-sched/corral/internal/sched"

// Pending is why each queued job waits, as the last cycle said: its
// list, and each job's index in it. A map of the reasons themselves cost
// a cycle 27-41 ms at 100,000 queued jobs to fill (each value is moved
// into the map's groups), one of indexes about 4 ms. The zero value is
// empty and ready. Like the Book, it has no lock of its own.
type Pending struct {
	list []sched.Pending
	at   map[string]int32
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

// Drop forgets job id's reason.
func (b *Pending) Drop(id string) { delete(b.at, id) }
