package readview

import (
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestMergePage(t *testing.T) {
	jobs := func(ids ...string) []api.Job {
		out := make([]api.Job, len(ids))
		for i, id := range ids {
			out[i] = api.Job{ID: id}
		}
		return out
	}
	tests := []struct {
		name     string
		mem, old []api.Job
		limit    int
		full     bool
		want     []string
		wantNext string
	}{
		{"interleaved", jobs("09", "05"), jobs("07", "03"), 10, false, []string{"09", "07", "05", "03"}, ""},
		{"in both: once, from the store", jobs("07", "05"), jobs("07"), 10, false, []string{"07", "05"}, ""},
		{"limit cuts", jobs("09", "05"), jobs("07"), 2, false, []string{"09", "07"}, "07"},
		{"full store page: nothing below its last row", jobs("09", "02"), jobs("07", "05"), 10, true, []string{"09", "07", "05"}, "05"},
	}
	for _, tc := range tests {
		got, next := MergePage(tc.mem, tc.old, tc.limit, tc.full)
		var ids []string
		for _, j := range got {
			ids = append(ids, j.ID)
			if slices.ContainsFunc(tc.old, func(o api.Job) bool { return o.ID == j.ID }) && j.Allocation == nil {
				t.Errorf("%s: stored job %s has a null allocation", tc.name, j.ID)
			}
		}
		if !slices.Equal(ids, tc.want) || next != tc.wantNext {
			t.Errorf("%s: %v next %q, want %v next %q", tc.name, ids, next, tc.want, tc.wantNext)
		}
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{50, 5}, {95, 10}, {0, 1}, {100, 10}} {
		if got := Percentile(v, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestStatistics(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	jobs := []*api.Job{
		{ID: "run", State: api.StateRunning, SubmittedAt: now.Add(-40 * time.Minute), StartedAt: at(30 * time.Minute)},                                // waited 10 min, this hour
		{ID: "done", State: api.StateCompleted, SubmittedAt: now.Add(-3 * time.Hour), StartedAt: at(2 * time.Hour), FinishedAt: at(10 * time.Minute)}, // waited 1 h
		{ID: "old", State: api.StateCompleted, SubmittedAt: now.Add(-50 * time.Hour), StartedAt: at(48 * time.Hour), FinishedAt: at(47 * time.Hour)},  // out of the day
	}
	s := Statistics(3, slices.Values(jobs), func(j *api.Job) time.Time { return j.SubmittedAt }, now)
	want := api.QueueStatistics{TotalQueued: 3, TotalRunning: 1, CompletedLastHour: 1, QueueThroughput: 1,
		AverageWaitTime: 2100, WaitTimeP50: 600, WaitTimeP95: 3600, WaitTimeP99: 3600}
	if s != want {
		t.Errorf("statistics %+v, want %+v", s, want)
	}
}
