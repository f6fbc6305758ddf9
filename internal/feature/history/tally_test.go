package history

import (
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The tally counts each event once: the events of the jobs handed to
// Take and JobCounters, and those of jobs that leave memory (Gone); the
// sample's interval holds only those after the previous sample.
func TestTallyCountsEachEventOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	ev := func(d time.Duration, from, to api.State) api.Event {
		return api.Event{At: t0.Add(d), From: from, To: to}
	}
	a := &api.Job{ID: "a", SubmittedAt: t0, Events: []api.Event{ev(0, "", api.StateQueued), ev(10*time.Second, api.StateQueued, api.StateRunning)}}
	b := &api.Job{ID: "b", SubmittedAt: t0, Events: []api.Event{ev(0, "", api.StateQueued)}}
	var h Books
	jobs := func(js ...*api.Job) func(func(*api.Job) bool) { return slices.Values(js) }

	iv := h.Take(jobs(a, b), t0.Add(Interval))
	if iv.Started != 1 || iv.WaitSum != 10 || iv.WaitMax != 10 || iv.Completed != 0 {
		t.Fatalf("first interval %+v; want one start after 10s", iv)
	}
	// a ends; b starts after 40s, ends failed, and leaves memory before
	// the next sample: both count in it, once.
	a.Events = append(a.Events, ev(Interval+time.Second, api.StateRunning, api.StateCompleted))
	b.Events = append(b.Events, ev(40*time.Second, api.StateQueued, api.StateRunning), ev(50*time.Second, api.StateRunning, api.StateFailed))
	h.Gone([]*api.Job{b}, t0.Add(Interval+2*time.Second))
	iv = h.Take(jobs(a), t0.Add(2*Interval))
	if iv.Started != 1 || iv.Completed != 1 || iv.Failed != 1 || iv.WaitMax != 40 {
		t.Fatalf("second interval %+v; want b's start (40s) and failure, a's completion", iv)
	}
	if iv = h.Take(jobs(a), t0.Add(3*Interval)); iv != (Counts{}) {
		t.Fatalf("third interval %+v; want nothing new", iv)
	}
	c := h.JobCounters(jobs(a), t0.Add(3*Interval))
	if c.Starts != 2 || c.WaitCount != 2 || c.WaitSum != 50 || c.Ended[api.StateCompleted] != 1 || c.Ended[api.StateFailed] != 1 {
		t.Fatalf("counters %+v", c)
	}
	// WaitCounts are cumulative by bound: 10s and 40s are both under 60s,
	// only 10s under 15s.
	at := func(le float64) uint64 { return c.WaitCounts[slices.Index(WaitBuckets, le)] }
	if at(15) != 1 || at(60) != 2 {
		t.Fatalf("wait buckets %v", c.WaitCounts)
	}
}
