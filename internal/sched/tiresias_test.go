package sched

import (
	"testing"
	"time"
)

// Under sjf a job with no estimate at all is ordered by the GPU time it
// has attained (Tiresias): one that has not run yet goes before an
// estimated job submitted at the same time, one that ran long goes after.
func TestSJFWithoutEstimatesOrdersByAttainedService(t *testing.T) {
	h := time.Hour
	none := func(id string, attained time.Duration) *jb {
		b := mk(id).guess(DefaultEstimate)
		b.NoEstimate, b.Attained = true, attained
		return b
	}
	tests := map[string]struct {
		queue []Job
		want  []string
	}{
		"a new job before an estimated one": {
			queue: jobs(mk("est").est(10*time.Minute), none("new", 0)),
			want:  []string{"new", "est"},
		},
		"least attained first": {
			queue: jobs(none("ran", 5*h), none("fresh", 0), none("some", h)),
			want:  []string{"fresh", "some", "ran"},
		},
		"attained counts like an estimate": {
			queue: jobs(none("ran", 5*h), mk("est").est(2*h)),
			want:  []string{"est", "ran"},
		},
		"a default estimate that is not flagged keeps its place": {
			queue: jobs(mk("est").est(10*time.Minute), mk("guess").guess(DefaultEstimate)),
			want:  []string{"est", "guess"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ids(Order(tc.queue, Policy{Name: PolicySJF}))
			if len(got) != len(tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("order %v, want %v", got, tc.want)
				}
			}
		})
	}
}
