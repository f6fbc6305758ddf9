package orchestrator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// readBench is an orchestrator over the in-memory store with two 8-GPU
// nodes, 16 jobs running, queued jobs by ten users behind them and, when
// ended > 0, that many canceled jobs in the store: what the read views
// are measured over.
func readBench(b *testing.B, queued, ended int) *Orchestrator {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o, err := New(ctx, Config{Store: memstore.New(), Executor: nopExec{}, Nodes: []Node{simNode("n1", 8), simNode("n2", 8)},
		DataDir: b.TempDir(), Tick: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	one := 1
	total := 16 + queued + ended
	ids := make([]string, total)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 8 {
				req := api.SubmitRequest{Name: fmt.Sprintf("job-%d", i), User: fmt.Sprintf("u%d", i%10), Command: "true", GPUCount: &one}
				j, _, err := o.Submit(ctx, req, "")
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = j.ID
			}
		}()
	}
	wg.Wait()
	for _, id := range ids[len(ids)-ended:] {
		if _, _, err := o.Cancel(ctx, id, 0); err != nil {
			b.Fatal(err)
		}
	}
	return o
}

// BenchmarkReads measures the public read views over 16 running jobs,
// 5,000 queued ones and 1,000 that ended: GET /queue built afresh
// (Queue) and a page of it (QueuePage, from the cached view), a page of
// GET /jobs (memory merged with the store), one user's jobs, one job,
// the cluster's GPUs, and the dashboard's update.
func BenchmarkReads(b *testing.B) {
	o := readBench(b, 5000, 1000)
	ctx := context.Background()
	queued := o.Queue().QueuedJobs
	id := queued[len(queued)/2].ID
	for _, bc := range []struct {
		name string
		read func() int
	}{
		{"Queue", func() int { return len(o.Queue().QueuedJobs) }},
		{"QueuePage", func() int {
			r, _ := o.QueuePage(500, "")
			return len(r.QueuedJobs)
		}},
		{"QueuePageOf", func() int {
			r, _ := o.QueuePageOf("u3", 100, "")
			return len(r.QueuedJobs)
		}},
		{"JobPage", func() int {
			p, _, _ := o.JobPage(ctx, JobFilter{Limit: 500})
			return len(p)
		}},
		{"Jobs_user", func() int { return len(o.Jobs(JobFilter{User: "u3", Limit: 100})) }},
		{"Job", func() int {
			j, _ := o.Job(id)
			return len(j.Events)
		}},
		{"Cluster", func() int { return len(o.Cluster(ctx).Nodes) }},
		{"WhatIf", func() int {
			w, _ := o.WhatIf(ctx, id, 2)
			return w.GPUs
		}},
		{"Dashboard", func() int { return len(o.Dashboard(ctx).Queue.QueuedJobs) }},
	} {
		if bc.read() == 0 {
			b.Fatalf("%s read nothing", bc.name)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.read()
			}
		})
	}
}
