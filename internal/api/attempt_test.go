package api

import (
	"testing"
	"time"
)

func TestResetAttemptAndLastEntered(t *testing.T) {
	t0 := time.Unix(1000, 0)
	code := 3
	j := &Job{StartedAt: &t0, ExitCode: &code, NodeID: "n1", Allocation: []Allocation{{NodeID: "n1"}},
		Borrowed: true, Preempting: true, PreemptMessage: "x", Idle: true, IdleSince: &t0,
		Events: []Event{{At: t0, To: StateQueued}, {At: t0.Add(time.Minute), To: StateRunning}, {At: t0.Add(2 * time.Minute), To: StateQueued}}}
	j.ResetAttempt()
	if j.StartedAt != nil || j.ExitCode != nil || j.NodeID != "" || j.Allocation == nil || len(j.Allocation) != 0 ||
		j.Borrowed || j.Preempting || j.PreemptMessage != "" || j.Idle || j.IdleSince != nil {
		t.Errorf("after ResetAttempt: %+v", j)
	}
	for _, tc := range []struct {
		to   State
		want time.Time
	}{
		{StateQueued, t0.Add(2 * time.Minute)},
		{StateRunning, t0.Add(time.Minute)},
		{StateCompleted, time.Time{}},
	} {
		if got := j.LastEntered(tc.to); !got.Equal(tc.want) {
			t.Errorf("LastEntered(%s) = %v, want %v", tc.to, got, tc.want)
		}
	}
}
