package orchestrator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// TestElasticGrantAndRequeue: an elastic job starts with what is free and
// records it; preempted and requeued, it starts again with what fits then.
func TestElasticGrantAndRequeue(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	if _, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Policy: ptr("priority"), Preemption: ptr(true), MinRunTime: api.RawValue(`0`)}); err != nil {
		t.Fatal(err)
	}
	small := h.submit(api.SubmitRequest{Command: "small", User: "ana", GPUCount: gpus(3), Priority: api.RawValue(`"critical"`)})
	if task := h.nextStart(); task.JobID != small.ID {
		t.Fatalf("started %s, want the small job", task.JobID)
	}
	e := h.submit(api.SubmitRequest{Command: "elastic", User: "bob", GPUCount: gpus(8), GPUCountMin: gpus(4), Priority: api.RawValue(`"low"`)})
	if e.GPUCountMin != 4 || e.GPUCount != 8 {
		t.Fatalf("submitted = %+v", e)
	}
	if task := h.nextStart(); task.JobID != e.ID || len(task.GPUs) != 5 {
		t.Fatalf("task = %+v, want the elastic job on the 5 free GPUs", task)
	}
	if j := h.waitState(e.ID, api.StateAllocating); j.GrantedGPUs != 5 || len(j.Allocation) != 5 {
		t.Fatalf("granted %d, allocation %d, want 5", j.GrantedGPUs, len(j.Allocation))
	}
	h.o.Sink(exec.Update{JobID: e.ID, Kind: exec.Started, At: time.Now()})
	h.waitState(e.ID, api.StateRunning)

	// A high job of 6 preempts it (3 free are not enough); the small job
	// ends meanwhile, so once the high job runs 2 are free: too few.
	h.o.Sink(exec.Update{JobID: small.ID, Kind: exec.Exited, At: time.Now()})
	high := h.submit(api.SubmitRequest{Command: "high", User: "cy", GPUCount: gpus(6), Priority: api.RawValue(`"high"`)})
	if stop := <-h.ex.stops; stop.jobID != e.ID {
		t.Fatalf("stopped %s, want the elastic job", stop.jobID)
	}
	h.o.Sink(exec.Update{JobID: e.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 143, Signal: "terminated"})
	if task := h.nextStart(); task.JobID != high.ID {
		t.Fatalf("started %s, want the high job", task.JobID)
	}
	h.waitState(e.ID, api.StateQueued)
	h.noStart()
	q := h.o.Queue()
	if len(q.QueuedJobs) != 1 || q.QueuedJobs[0].RequestedGPUs != 8 || q.QueuedJobs[0].RequestedGPUsMin != 4 {
		t.Fatalf("queue = %+v", q.QueuedJobs)
	}
	h.o.Sink(exec.Update{JobID: high.ID, Kind: exec.Exited, At: time.Now()})
	if task := h.nextStart(); task.JobID != e.ID || len(task.GPUs) != 8 || task.Attempt != 1 {
		t.Fatalf("restart = %+v, want the elastic job on all 8", task)
	}
	if j := h.waitState(e.ID, api.StateAllocating); j.GrantedGPUs != 8 {
		t.Fatalf("granted %d on restart, want 8", j.GrantedGPUs)
	}
}

// TestElasticWaitsForItsMaximum: within elastic_wait the job waits for
// its maximum; once the clock passes it, the next cycle gives it less.
func TestElasticWaitsForItsMaximum(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx, cancel := context.WithCancel(context.Background())
	ex := newFakeExec()
	o, err := New(ctx, Config{Store: memstore.New(), Executor: ex, Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(), Tick: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	h := &harness{t: t, o: o, ex: ex}

	h.submit(api.SubmitRequest{Command: "small", GPUCount: gpus(2)})
	h.nextStart()
	e := h.submit(api.SubmitRequest{Command: "elastic", GPUCount: gpus(8), GPUCountMin: gpus(2), ElasticWait: api.RawValue(`"1h"`)})
	h.noStart()
	if j, _ := h.o.Job(e.ID); j.PendingReason != "insufficient_gpus" || j.ElasticWait == nil || j.ElasticWait.Duration() != time.Hour {
		t.Fatalf("waiting elastic job: %q %q %v", j.PendingReason, j.PendingMessage, j.ElasticWait)
	}
	mu.Lock()
	now = now.Add(61 * time.Minute)
	mu.Unlock()
	h.waitCycle()
	if task := h.nextStart(); task.JobID != e.ID || len(task.GPUs) != 6 {
		t.Fatalf("task = %+v, want the elastic job on the 6 free GPUs", task)
	}
}
