package sim

import (
	"testing"

	"github.com/corral-sched/corral/internal/sched"
)

// Learned estimates, worked by hand: one user runs "n" five times, one
// after the other. The first three have too little history (three runs
// are needed): none. The fourth is estimated at the mean of 100, 120, 80
// (100; backfill plans on the high end, 120) and runs 140: within 50%.
// The fifth is estimated at the mean of 100, 120, 80, 140 (110) and runs
// 50: off by 2.2x.
func TestLearnedEstimates(t *testing.T) {
	jobs := jsonl(t,
		`{"id":"a","submit":0,"duration_s":100,"gpus":1,"user":"ana","name":"n"}`,
		`{"id":"b","submit":200,"duration_s":120,"gpus":1,"user":"ana","name":"n"}`,
		`{"id":"c","submit":400,"duration_s":80,"gpus":1,"user":"ana","name":"n"}`,
		`{"id":"d","submit":600,"duration_s":140,"gpus":1,"user":"ana","name":"n"}`,
		`{"id":"e","submit":900,"duration_s":50,"gpus":1,"user":"ana","name":"n"}`,
	)
	for _, tc := range []struct {
		mode                string
		within, off, absent float64
	}{
		{EstimatesLearned, 0.2, 0.2, 0.6},
		{EstimatesExact, 1, 0, 0},
		{EstimatesAbsent, 0, 0, 1}, // the per-user mean is not an estimate the core backfills on
	} {
		out, err := Run(jobs, Config{Nodes: 1, NodeGPUs: 4, Policy: sched.Policy{Name: sched.PolicyFairShare, Backfill: true}, Estimates: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		m := out.Metrics
		if m.EstimatesWithin50 != tc.within || m.EstimatesOff2x != tc.off || m.EstimatesNone != tc.absent {
			t.Errorf("%s: within 50%% %v, off 2x %v, none %v; want %v, %v, %v", tc.mode, m.EstimatesWithin50, m.EstimatesOff2x,
				m.EstimatesNone, tc.within, tc.off, tc.absent)
		}
	}
}
