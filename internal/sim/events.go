package sim

import (
	"container/heap"
	"time"
)

// push schedules an event of the given kind for an attempt of job.
func (s *sim) push(at time.Time, kind, job, attempt int) {
	s.seq++
	heap.Push(&s.events, event{at: at.UnixNano(), seq: s.seq, kind: kind, job: job, attempt: attempt})
}

// event kinds
const (
	evEnd       = iota // an attempt ends: completed, or stopped after preemption
	evProtected        // an attempt's min_run_time protection ends (preemption on)
)

type event struct {
	at      int64 // UnixNano
	seq     int
	kind    int
	job     int
	attempt int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].seq < h[b].seq
}
func (h eventHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
