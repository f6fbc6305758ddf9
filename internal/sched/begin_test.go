package sched

import (
	"strings"
	"testing"
	"time"
)

// A job with a begin time (submit --begin) waits for it with its own
// reason and message, then starts; a backoff keeps its own.
func TestBeginTime(t *testing.T) {
	a := node("a", 8, "H100", 80)
	begin := mk("begin").build()
	begin.NotBefore, begin.Begin = t0.Add(2*time.Hour), true
	backoff := mk("backoff").at(time.Minute).build()
	backoff.NotBefore = t0.Add(2 * time.Hour)
	for _, tc := range []struct {
		now    time.Time
		starts int
	}{{t0.Add(time.Hour), 0}, {t0.Add(3 * time.Hour), 2}} {
		r := Schedule(Snapshot{Now: tc.now, Nodes: []Node{a}, Queue: []Job{begin, backoff}, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
		if len(r.Starts) != tc.starts {
			t.Fatalf("at %s: %d starts, want %d", tc.now.Sub(t0), len(r.Starts), tc.starts)
		}
		if tc.starts > 0 {
			continue
		}
		for _, p := range r.Pending {
			want := map[string]string{"begin": ReasonBeginTime, "backoff": ReasonBackoff}[p.JobID]
			if p.Reason != want || !p.EstimatedStart.Equal(t0.Add(2*time.Hour)) {
				t.Errorf("%s pends %q until %v; want %q until its time", p.JobID, p.Reason, p.EstimatedStart, want)
			}
			if p.JobID == "begin" && !strings.Contains(p.Message(), "begin time") {
				t.Errorf("message %q", p.Message())
			}
		}
	}
}
