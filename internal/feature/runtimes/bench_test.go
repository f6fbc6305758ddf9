package runtimes

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// BenchmarkEstimator is one snapshot's estimates of 10,000 queued jobs
// (100 users, 20 names each) over a history of 20,000 runs: the first
// snapshot after a run ended (the memo cleared) and the next ones.
func BenchmarkEstimator(b *testing.B) {
	bk := New(fakeCluster{})
	for i := range 20000 {
		j := job(fmt.Sprint("r", i), fmt.Sprint("name", i%20), time.Duration(1+i%50)*time.Minute)
		j.User = fmt.Sprint("u", i%100)
		ended(bk, j, api.ReasonExited)
	}
	queue := make([]*api.Job, 10000)
	for i := range queue {
		queue[i] = &api.Job{ID: fmt.Sprint("q", i), User: fmt.Sprint("u", i%100), Name: fmt.Sprint("name", i%20),
			Command: fmt.Sprint("python train.py --seed ", i%7), GPUCount: 4, Nodes: 1, State: api.StateQueued}
	}
	// A queue in runs of one kind: 500 jobs of each user's name in a row.
	runs := make([]*api.Job, len(queue))
	for i := range runs {
		k := i / 500
		runs[i] = &api.Job{ID: fmt.Sprint("s", i), User: fmt.Sprint("u", k%100), Name: fmt.Sprint("name", k%20),
			Command: "python train.py", GPUCount: 4, Nodes: 1, State: api.StateQueued}
	}
	b.Run("runs of one kind", func(b *testing.B) {
		for b.Loop() {
			est := bk.Estimator(t0, fallback)
			for _, j := range runs {
				est(j)
			}
		}
	})
	for _, fresh := range []bool{true, false} {
		b.Run(map[bool]string{true: "after a run ended", false: "memo kept"}[fresh], func(b *testing.B) {
			for b.Loop() {
				if fresh {
					bk.mu.Lock()
					clear(bk.memo)
					bk.mu.Unlock()
				}
				est := bk.Estimator(t0, fallback)
				for _, j := range queue {
					est(j)
				}
			}
		})
	}
}
