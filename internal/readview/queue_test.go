package readview

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

func TestQueuedRow(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	v := &api.Job{ID: "j1", Number: 7, User: "ana", GPUCount: 2, Nodes: 3, QueuePosition: 4, PendingReason: "resources", EstimateBasis: "default"}
	tests := []struct {
		name     string
		plan     *sched.StartRange
		wantWait *float64
	}{
		{"no plan: no start, no wait", nil, nil},
		{"a plan ahead", &sched.StartRange{At: now.Add(time.Minute), From: now, To: now.Add(time.Hour)}, ptr(60.0)},
		{"a plan past: no negative wait", &sched.StartRange{At: now.Add(-time.Minute), From: now, To: now}, ptr(0.0)},
	}
	for _, tc := range tests {
		q := QueuedRow(v, now.Add(-90*time.Second), tc.plan, now)
		if q.ID != "j1" || q.Number != 7 || q.RequestedGPUs != 6 || q.QueuePosition != 4 || q.WaitedSeconds != 90 || q.PendingReason != "resources" || q.EstimateBasis != "default" {
			t.Errorf("%s: row %+v", tc.name, q)
		}
		switch {
		case tc.wantWait == nil && (q.EstimatedWaitTime != nil || q.EstimatedStartTime != nil):
			t.Errorf("%s: wait %v start %v, want none", tc.name, q.EstimatedWaitTime, q.EstimatedStartTime)
		case tc.wantWait != nil && (q.EstimatedWaitTime == nil || *q.EstimatedWaitTime != *tc.wantWait || !q.EstimatedStartTime.Equal(tc.plan.At)):
			t.Errorf("%s: wait %v start %v, want %v at %v", tc.name, q.EstimatedWaitTime, q.EstimatedStartTime, *tc.wantWait, tc.plan.At)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestUnordered(t *testing.T) {
	held := func(r string) bool { return r == "dependency" }
	tests := []struct {
		name    string
		rows    []api.QueuedJob
		running bool
		want    bool
	}{
		{"all placed", []api.QueuedJob{{QueuePosition: 1}, {QueuePosition: 2}}, true, false},
		{"one came after the cycle", []api.QueuedJob{{QueuePosition: 1}, {}}, true, true},
		{"a task takes its array's place", []api.QueuedJob{{QueuePosition: 1}, {ArrayJobID: "a"}}, true, false},
		{"a held job has no place", []api.QueuedJob{{QueuePosition: 1}, {PendingReason: "dependency"}}, true, false},
		{"scheduling stopped", []api.QueuedJob{{QueuePosition: 1}}, false, true},
		{"scheduling stopped, nothing queued", nil, false, false},
	}
	for _, tc := range tests {
		if got := Unordered(tc.rows, tc.running, held); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRenumberAndSort(t *testing.T) {
	at := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	rows := []api.QueuedJob{{ID: "c", QueuedAt: at}, {ID: "a", QueuedAt: at.Add(time.Second)}, {ID: "b", QueuedAt: at}, {ID: "x", QueuedAt: at}}
	Renumber(rows, []sched.Job{{ID: "b"}, {ID: "c"}, {ID: "a"}})
	SortQueue(rows)
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
	}
	// x is not in the order: position 0 sorts first, as the core left it.
	if want := []string{"x", "b", "c", "a"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestCursor(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		invalid bool
	}{{"", 0, false}, {"0", 0, false}, {"500", 500, false}, {"-1", 0, true}, {"abc", 0, true}}
	for _, tc := range tests {
		n, err := Cursor(tc.in)
		var ae *api.Error
		if n != tc.want || (err != nil) != tc.invalid || (err != nil && (!errors.As(err, &ae) || ae.Field != "cursor")) {
			t.Errorf("Cursor(%q) = %d, %v; want %d, invalid %v naming cursor", tc.in, n, err, tc.want, tc.invalid)
		}
	}
}

func TestOfUser(t *testing.T) {
	r := api.QueueResponse{
		QueuedJobs: []api.QueuedJob{{ID: "1", User: "ana", ArrayJobID: "A"}, {ID: "2", User: "bo", ArrayJobID: "B"}, {ID: "3", User: "ana"}},
		Arrays:     []api.Array{{ID: "A"}, {ID: "B"}},
		Statistics: api.QueueStatistics{TotalQueued: 3},
	}
	tests := []struct {
		user         string
		rows, arrays []string
	}{{"ana", []string{"1", "3"}, []string{"A"}}, {"bo", []string{"2"}, []string{"B"}}, {"cy", []string{}, nil}}
	for _, tc := range tests {
		got := OfUser(r, tc.user)
		rows, arrays := []string{}, []string(nil)
		for _, q := range got.QueuedJobs {
			rows = append(rows, q.ID)
		}
		for _, a := range got.Arrays {
			arrays = append(arrays, a.ID)
		}
		if got.QueuedJobs == nil || !slices.Equal(rows, tc.rows) || !slices.Equal(arrays, tc.arrays) || got.Statistics.TotalQueued != 3 {
			t.Errorf("OfUser(%s): rows %v arrays %v stats %+v; want %v %v, the whole queue's", tc.user, rows, arrays, got.Statistics, tc.rows, tc.arrays)
		}
	}
	if len(r.QueuedJobs) != 3 {
		t.Errorf("OfUser changed the shared rows: %v", r.QueuedJobs)
	}
}
