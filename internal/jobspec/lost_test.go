package jobspec

import (
	"testing"
	"time"
)

func TestLost(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                        string
		retries, preemptions, maxed int
		requeue                     bool
		wait                        time.Duration
		msg                         string
	}{
		{"first loss", 0, 0, 3, true, 10 * time.Second, "node gone; requeued (retry 1 of 3) to start no sooner than in 10s"},
		{"second loss: the wait doubles", 1, 0, 3, true, 20 * time.Second, "node gone; requeued (retry 2 of 3) to start no sooner than in 20s"},
		{"preemptions do not count", 3, 2, 3, true, 20 * time.Second, "node gone; requeued (retry 2 of 3) to start no sooner than in 20s"},
		{"the wait is capped", 7, 0, 10, true, BackoffMax, "node gone; requeued (retry 8 of 10) to start no sooner than in 10m0s"},
		{"no retries left", 3, 0, 3, false, 0, "node gone; no retries left (max_retries 3)"},
		{"no retries at all", 0, 0, 0, false, 0, "node gone; no retries left (max_retries 0)"},
	} {
		requeue, notBefore, msg := Lost("node gone", tc.retries, tc.preemptions, tc.maxed, 10*time.Second, now)
		wantAt := time.Time{}
		if tc.requeue {
			wantAt = now.Add(tc.wait)
		}
		if requeue != tc.requeue || !notBefore.Equal(wantAt) || msg != tc.msg {
			t.Errorf("%s: %v %v %q, want %v %v %q", tc.name, requeue, notBefore, msg, tc.requeue, wantAt, tc.msg)
		}
	}
}
