package history

import (
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/featuretest"
)

// TestOpsJobCounters: the counters read memory under the loop's read
// lock, once per call, and count each event once across calls; the
// cycles' histogram is the books'.
func TestOpsJobCounters(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	ev := func(d time.Duration, from, to api.State) api.Event {
		return api.Event{At: t0.Add(d), From: from, To: to}
	}
	a := &api.Job{ID: "a", SubmittedAt: t0, Events: []api.Event{ev(0, "", api.StateQueued), ev(20*time.Second, api.StateQueued, api.StateRunning)}}
	var books Books
	l := &featuretest.Loop{}
	inRead := 0
	ops := Ops{Books: &books, Loop: l, Now: func() time.Time { return t0.Add(time.Minute) },
		Live: func() iter.Seq[*api.Job] { inRead = l.Reads; return slices.Values([]*api.Job{a}) }}
	for _, tc := range []struct {
		name           string
		starts, reads  int
		completed      uint64
		addCompletedAt time.Duration
	}{
		{"the first start", 1, 1, 0, 0},
		{"read again: counted once", 1, 2, 0, 0},
		{"the job completes", 1, 3, 1, 30 * time.Second},
	} {
		if tc.addCompletedAt > 0 {
			a.Events = append(a.Events, ev(tc.addCompletedAt, api.StateRunning, api.StateCompleted))
		}
		c := ops.JobCounters()
		if c.Starts != uint64(tc.starts) || c.Ended[api.StateCompleted] != tc.completed {
			t.Fatalf("%s: counters %+v; want %d starts, %d completed", tc.name, c, tc.starts, tc.completed)
		}
		if l.Reads != tc.reads || inRead != tc.reads {
			t.Fatalf("%s: %d reads, memory read in read %d; want %d", tc.name, l.Reads, inRead, tc.reads)
		}
	}
	books.ObserveCycle(250 * time.Millisecond)
	if h := ops.CycleDurations(); h.Count != 1 {
		t.Fatalf("cycle durations %+v; want one", h)
	}
}
