package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// tunedSource is a simulated node whose GPUs' utilization a test sets.
type tunedSource struct {
	gpu.Source
	util atomic.Int32 // > 0: every GPU reads this utilization
}

func (s *tunedSource) Telemetry(ctx context.Context) ([]gpu.Telemetry, error) {
	t, err := s.Source.Telemetry(ctx)
	if u := int(s.util.Load()); u > 0 {
		for i := range t {
			t[i].Utilization = u
		}
	}
	return t, err
}

// BenchmarkDashboardEvents measures GET /events at the scale:
// 1,000 nodes of 8 GPUs, all held by 500 running jobs (2 nodes x 8 GPUs
// each), and 5,000 queued jobs of 8 GPUs waiting (the update carries the
// first 500). It reports the bytes of a full update and of a delta when
// nothing changed (full, delta), the time to build and marshal each (build:
// the orchestrator's part alone), and logs the bytes of the delta after
// each of a few typical changes.
//
//	go test ./internal/server -run '^$' -bench DashboardEvents -benchtime 20x
func BenchmarkDashboardEvents(b *testing.B) {
	ctx := context.Background()
	re := &runExec{}
	nodes := make([]orchestrator.Node, 1000)
	sources := make([]*tunedSource, len(nodes))
	for i := range nodes {
		id := fmt.Sprintf("gpu-%04d", i)
		sources[i] = &tunedSource{Source: gpu.NewSimulated(id, gpu.SimSpec{Count: 8, Model: "H100", MemoryGB: 80, Topology: "pairs"})}
		devs, _ := sources[i].Devices(ctx)
		nodes[i] = orchestrator.Node{ID: id, Hostname: id + ".cluster.local", Devices: devs, Telemetry: sources[i], Simulated: true,
			Labels: map[string]string{"rack": fmt.Sprintf("r%02d", i/40), "fabric": "ib"}}
	}
	_, o, _ := newBackendOf(b, re, slog.New(slog.DiscardHandler), nodes)
	re.o = o
	submit := func(i int, gpus, nodes int, user string) api.Job {
		b.Helper()
		if user == "" {
			user = fmt.Sprintf("user%02d", i%40)
		}
		req := api.SubmitRequest{Name: fmt.Sprintf("train-llama-%d", i), User: user, Project: fmt.Sprintf("proj%d", i%7),
			Command: "python train.py --config configs/llama-7b.yaml --lr 3e-4 --seed " + fmt.Sprint(i), Workdir: "/home/shared/llama",
			Env: map[string]string{"WANDB_PROJECT": "llama", "NCCL_DEBUG": "WARN"}, GPUCount: &gpus, Nodes: nodes,
			EstimatedDuration: api.RawValue(`"2h"`)}
		j, _, err := o.Submit(ctx, req, "")
		if err != nil {
			b.Fatal(err)
		}
		return j
	}
	wait := func(what string, ok func() bool) {
		b.Helper()
		timeout := time.After(2 * time.Minute)
		for {
			changed := o.Changed()
			if ok() {
				return
			}
			select {
			case <-changed:
			case <-timeout:
				b.Fatalf("waited too long for %s", what)
			}
		}
	}
	began := time.Now()
	var running []api.Job
	for i := range 500 {
		running = append(running, submit(i, 8, 2, ""))
	}
	wait("500 running jobs", func() bool { return o.Status().RunningJobs == 500 })
	b.Logf("500 running: %s", time.Since(began).Round(time.Second))
	if _, err := o.SetScheduling(ctx, false); err != nil { // the submissions go faster
		b.Fatal(err)
	}
	for i := range 5000 {
		submit(500+i, 8, 1, "")
	}
	if _, err := o.SetScheduling(ctx, true); err != nil {
		b.Fatal(err)
	}
	b.Logf("5,000 submitted: %s", time.Since(began).Round(time.Second))
	wait("5,000 queued jobs in the head", func() bool {
		u := o.Dashboard(ctx)
		return u.Queue.Statistics.TotalQueued == 5000 && len(u.Queue.QueuedJobs) == 500 && u.Queue.QueuedJobs[499].QueuePosition == 500
	})
	time.Sleep(time.Second) // let the cycles settle
	b.Logf("setup: %s; a cycle: %.0f ms", time.Since(began).Round(time.Second), o.Status().LastCycleMS)

	first, err := json.Marshal(o.Dashboard(ctx))
	if err != nil {
		b.Fatal(err)
	}
	view := newStreamView()
	if _, _, err := nextEvent(view, o.Dashboard(ctx), true); err != nil {
		b.Fatal(err)
	}
	// step sends the event after change, as a stream does, and logs its size.
	step := func(name string, change func()) {
		b.Helper()
		change()
		event, data, err := nextEvent(view, o.Dashboard(ctx), false)
		if err != nil || event != "delta" {
			b.Fatalf("%s: %s %v", name, event, err)
		}
		b.Logf("%-55s %8d bytes", name, len(data))
	}
	b.Logf("%-55s %8d bytes", "the full update", len(first))
	step("nothing changed (the 5 s refresh)", func() {})
	step("telemetry changed on one node", func() { sources[17].util.Store(93) })
	step("telemetry changed on 100 nodes", func() {
		for _, s := range sources[100:200] {
			s.util.Store(88)
		}
	})
	step("a job submitted past the head of the queue", func() {
		j := submit(9000, 8, 1, "")
		wait("the submission", func() bool { q, _ := o.Job(j.ID); return q.QueuePosition > 0 })
	})
	step("a job submitted at the head (a user without usage)", func() {
		j := submit(9001, 8, 1, "newcomer")
		wait("the submission", func() bool { q, _ := o.Job(j.ID); return q.QueuePosition > 0 })
	})
	step("a job of the head canceled", func() {
		head := o.Dashboard(ctx).Queue.QueuedJobs[10]
		if _, _, err := o.Cancel(ctx, head.ID, 0); err != nil {
			b.Fatal(err)
		}
		wait("the cancel", func() bool { return len(o.Dashboard(ctx).Queue.QueuedJobs) == 500 && o.Status().QueuedJobs == 5001 })
	})
	step("a running job ended, two queued ones started", func() {
		o.Sink(exec.Update{JobID: running[0].ID, Kind: exec.Exited, At: time.Now(), ExitCode: 0})
		wait("two starts", func() bool { return o.Status().RunningJobs == 501 })
		// Under fair_share the ended job's user now ranks first: the
		// head's 500 rows become that user's jobs.
	})
	step("nothing changed (the 5 s refresh)", func() {})

	b.Run("build", func(b *testing.B) { // what both pay: reading the orchestrator
		for b.Loop() {
			o.Dashboard(ctx)
		}
	})
	b.Run("full", func(b *testing.B) {
		var n int
		for b.Loop() {
			data, err := json.Marshal(o.Dashboard(ctx))
			if err != nil {
				b.Fatal(err)
			}
			n = len(data)
		}
		b.ReportMetric(float64(n), "bytes/event")
	})
	b.Run("delta", func(b *testing.B) {
		var n int
		for b.Loop() {
			_, data, err := nextEvent(view, o.Dashboard(ctx), false)
			if err != nil {
				b.Fatal(err)
			}
			n = len(data)
		}
		b.ReportMetric(float64(n), "bytes/event")
	})
}
