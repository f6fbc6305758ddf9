package orchestrator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// benchOrchestrator runs an orchestrator over a real SQLite store in a
// temporary directory, with the given nodes, and stops it with the
// benchmark. stop ends its loop early (the caller then is the loop).
func benchOrchestrator(b *testing.B, nodes []Node) (o *Orchestrator, stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
	if err != nil {
		b.Fatal(err)
	}
	o, err = New(ctx, Config{Store: st, Executor: nopExec{}, Nodes: nodes, DataDir: b.TempDir(),
		Tick: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	b.Cleanup(func() { stop(); st.Close() })
	return o, stop
}

// BenchmarkSubmitArray: one POST /queue/submit's work for an array of
// 1,000 or 10,000 tasks (parse, validate, the record and every task with
// its submitted event in one transaction, one fsync, into a real SQLite
// store), scheduling stopped. ns/op is one whole array; the target is
// under 200 ms for 10,000 tasks. BenchmarkFsync is the baseline: one
// bare write and fsync on the same disk.
func BenchmarkSubmitArray(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			o, _ := benchOrchestrator(b, []Node{simNode("n1", 8)})
			ctx := context.Background()
			if _, err := o.SetScheduling(ctx, false); err != nil {
				b.Fatal(err)
			}
			one := 1
			spec := fmt.Sprintf("0-%d%%16", n-1)
			b.ReportAllocs()
			for b.Loop() {
				req := api.SubmitRequest{Name: "sweep", User: "ana", Command: "python train.py --seed $CORRAL_ARRAY_TASK_ID", GPUCount: &one, Array: spec}
				if _, _, err := o.Submit(ctx, req, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkFsync is a bare 512-byte write and fsync of a file in a
// temporary directory: the floor under any durable submission.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 512)
	for b.Loop() {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCycleArrays is one whole scheduling cycle of the orchestrator
// (snapshot of live state, the core, the plan of start estimates, the
// books) on 1,000 nodes x 8 GPUs, all held by 8,000 running one-GPU jobs,
// with 100 arrays of 1,000 waiting one-GPU tasks: nothing can start, and
// every task waits. The target is under 10 ms. baseline: the same cycle
// with no arrays (the 8,000 running jobs alone).
func BenchmarkCycleArrays(b *testing.B) {
	for _, arrays := range []int{0, 100} {
		b.Run(fmt.Sprintf("arrays=%d", arrays), func(b *testing.B) {
			nodes := make([]Node, 1000)
			for i := range nodes {
				nodes[i] = simNode(fmt.Sprintf("n%04d", i), 8)
			}
			o, stop := benchOrchestrator(b, nodes)
			ctx := context.Background()
			one := 1
			// 8,000 jobs take every GPU (nopExec never reports them
			// running or ended: they hold their GPUs, allocating).
			var wg sync.WaitGroup
			for w := range 64 { // in parallel: their commits are shared
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < 8000; i += 64 {
						req := api.SubmitRequest{User: fmt.Sprintf("u%d", i%8), Command: "train", GPUCount: &one}
						if _, _, err := o.Submit(ctx, req, ""); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			waitActive(b, o, 8000)
			for a := range arrays {
				req := api.SubmitRequest{User: fmt.Sprintf("u%d", a%8), Command: "sweep", GPUCount: &one, Array: "0-999"}
				if _, _, err := o.Submit(ctx, req, ""); err != nil {
					b.Fatal(err)
				}
			}
			stop()                           // the benchmark is the loop now
			o.pending.Plan(nil, time.Time{}) // a plan due
			b.ReportAllocs()
			for b.Loop() {
				o.dirty = true
				o.cycle(ctx, nil)
			}
			if o.stats.count == 0 || o.jobs.ActiveLen() != 8000 || o.jobs.Queued() != arrays*1000 {
				b.Fatalf("%d active, %d queued", o.jobs.ActiveLen(), o.jobs.Queued())
			}
		})
	}
}

// waitActive waits until n jobs hold GPUs.
func waitActive(b *testing.B, o *Orchestrator, n int) {
	b.Helper()
	deadline := time.After(60 * time.Second)
	for {
		ch := o.Changed()
		if o.Status().RunningJobs >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			b.Fatalf("%d jobs hold GPUs, want %d", o.Status().RunningJobs, n)
		}
	}
}
