package ray_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/exectest"
	"github.com/corral-sched/corral/internal/exec/ray"
	"github.com/corral-sched/corral/internal/exec/ray/raytest"
)

// TestConformance runs the executors' conformance suite against the Ray
// executor driving the Jobs API emulator (a real Ray cannot be installed
// here: docs/ray.md). A restart is a second executor on the same emulated
// head, as a restarted server builds. The preemption notice is skipped:
// the Ray executor is not an exec.Noticer (the notice file lives on the
// Corral server, not on Ray's nodes), and so is the env case's check that
// the executor's own environment stays out (Ray cannot promise it).
func TestConformance(t *testing.T) {
	exectest.Run(t, func(t *testing.T) *exectest.Harness {
		c := raytest.New(raytest.Options{Nodes: []raytest.Node{{IP: "10.0.0.1", GPUs: 2, Head: true}, {IP: "10.0.0.2", GPUs: 2}}})
		t.Cleanup(c.Close)
		u := exectest.NewUpdates()
		start := func(t *testing.T) exec.Executor {
			ex, err := ray.New(ray.Config{Address: c.URL, Sink: u.Sink, Poll: 50 * time.Millisecond, StopWait: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { ex.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			return ex
		}
		return &exectest.Harness{
			Exec: start(t), Updates: u, Dir: t.TempDir(),
			Place: func(nodes, gpus int) ([]exec.Rank, bool) {
				if nodes > 2 || gpus > 2 {
					return nil, false
				}
				var rs []exec.Rank
				for i := range nodes {
					r := exec.Rank{NodeID: []string{"ray-10.0.0.1", "ray-10.0.0.2"}[i]}
					for g := range gpus {
						r.GPUs = append(r.GPUs, g)
					}
					rs = append(rs, r)
				}
				return rs, true
			},
			Restart: start,
			// docs/jobs.md "Other executors": the job's env goes in
			// runtime_env.env_vars, over the Ray worker's own.
			OwnEnvReaches: "the Ray worker that starts the entrypoint passes its own environment on; runtime_env.env_vars only add to it",
		}
	})
}
