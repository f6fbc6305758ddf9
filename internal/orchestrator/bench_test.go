package orchestrator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store"
)

// nopExec starts nothing; the benchmarks measure the submit path.
type nopExec struct{}

func (nopExec) Start(context.Context, exec.Task) error                 { return nil }
func (nopExec) Stop(context.Context, string, int, time.Duration) error { return nil }

// BenchmarkSubmitParallel: durable submissions (validation, the loop's
// group commit into a real SQLite store with fsync, the answer) from
// `callers` goroutines at once, each waiting for its answer before the next, with scheduling stopped as corral bench
// submit --hold does. ns/op is per submission across all callers.
func BenchmarkSubmitParallel(b *testing.B) {
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			st, err := store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
			if err != nil {
				b.Fatal(err)
			}
			o, err := New(ctx, Config{Store: st, Executor: nopExec{}, Nodes: []Node{simNode("n1", 8)}, DataDir: b.TempDir(),
				Tick: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { o.Run(ctx); close(done) }()
			defer func() { cancel(); <-done; st.Close() }()
			if _, err := o.SetScheduling(ctx, false); err != nil {
				b.Fatal(err)
			}
			one := 1
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						req := api.SubmitRequest{Name: "bench", User: "ana", Command: "true", GPUCount: &one}
						if _, _, err := o.Submit(ctx, req, fmt.Sprintf("ana/key-%d", i)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
