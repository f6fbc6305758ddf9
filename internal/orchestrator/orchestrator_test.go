package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store"
)

// fakeExec records starts and stops; the test plays the processes by
// sending updates through the orchestrator's sink.
type fakeExec struct {
	mu      sync.Mutex
	starts  chan exec.Task
	stops   chan stopCall
	failFor map[string]error
	notices []string
}

type stopCall struct {
	jobID   string
	attempt int
	grace   time.Duration
}

func newFakeExec() *fakeExec {
	return &fakeExec{starts: make(chan exec.Task, 100), stops: make(chan stopCall, 100), failFor: map[string]error{}}
}

func (f *fakeExec) Start(_ context.Context, t exec.Task) error {
	f.mu.Lock()
	err := f.failFor[t.Command]
	f.mu.Unlock()
	if err != nil {
		return err
	}
	f.starts <- t
	return nil
}

func (f *fakeExec) Stop(_ context.Context, id string, attempt int, grace time.Duration) error {
	f.stops <- stopCall{id, attempt, grace}
	return nil
}

// adoptingExec is fakeExec that adopts the running jobs a restarted
// orchestrator hands it, as the agents' executor does (their agents keep
// the jobs).
type adoptingExec struct{ *fakeExec }

func (adoptingExec) Adopt(context.Context, exec.Task) error { return nil }

type harness struct {
	t    *testing.T
	o    *Orchestrator
	ex   *fakeExec
	path string
	stop func()
}

func simNode(id string, n int) Node {
	var devs []gpu.Device
	for i := range n {
		devs = append(devs, gpu.Device{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", id, i), Model: "H100", MemoryMiB: 80 * 1024, Simulated: true})
	}
	return Node{ID: id, Hostname: id, Devices: devs, Simulated: true}
}

// start opens the store at path (a fresh one when empty) and runs an
// orchestrator over it with an 8-GPU node.
func start(t *testing.T, path string, reap func(map[string]bool) (int, error)) *harness {
	t.Helper()
	return startConfig(t, path, Config{Nodes: []Node{simNode("n1", 8)}, Reap: reap, Tick: time.Hour})
}

// startConfig opens the store at path (a fresh one when empty) and runs an
// orchestrator over it with cfg, its Store, Executor (a fake) and DataDir
// filled in; the harness stops it at the test's end.
func startConfig(t *testing.T, path string, cfg Config) *harness {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "corral.db")
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ex := newFakeExec()
	cfg.Store, cfg.DataDir = st, t.TempDir()
	if a, ok := cfg.Executor.(*adoptingExec); ok {
		a.fakeExec = ex // the test's executor adopts at start-up, as the agents' does
	} else {
		cfg.Executor = ex
	}
	o, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	h := &harness{t: t, o: o, ex: ex, path: path}
	h.stop = func() { cancel(); <-done; st.Close() }
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
	return h
}

func (h *harness) submit(req api.SubmitRequest) api.Job {
	h.t.Helper()
	j, _, err := h.o.Submit(context.Background(), req, "")
	if err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	return j
}

func (h *harness) nextStart() exec.Task {
	h.t.Helper()
	select {
	case t := <-h.ex.starts:
		return t
	case <-time.After(5 * time.Second):
		h.t.Fatal("no job started")
	}
	return exec.Task{}
}

func (h *harness) noStart() {
	h.t.Helper()
	h.waitCycle()
	select {
	case t := <-h.ex.starts:
		h.t.Fatalf("job %s started, want none", t.JobID)
	default:
	}
}

// waitCycle asks for a scheduling cycle and waits until it has run.
func (h *harness) waitCycle() {
	h.t.Helper()
	before := h.o.Status().Cycles
	deadline := time.After(5 * time.Second)
	ch := h.o.Changed()
	h.o.SetScheduling(context.Background(), true) // starting also asks for a cycle
	for h.o.Status().Cycles <= before {
		select {
		case <-deadline:
			h.t.Fatal("no cycle ran")
		case <-ch:
			ch = h.o.Changed()
		}
	}
}

// waitState waits until the job reaches the state.
func (h *harness) waitState(id string, want api.State) api.Job {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := h.o.Changed()
		j, err := h.o.Job(id)
		if err != nil {
			h.t.Fatal(err)
		}
		if j.State == want {
			return j
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("job %s is %s, want %s", id, j.State, want)
		}
	}
}

func gpus(n int) *int { return &n }

func TestLifecycle(t *testing.T) {
	h := start(t, "", nil)
	j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(2), User: "ana"})
	if j.State != api.StateQueued || j.User != "ana" || j.Priority != api.PriorityNormal || j.Nodes != 1 {
		t.Fatalf("submitted job = %+v", j)
	}
	task := h.nextStart()
	if task.JobID != j.ID || len(task.GPUs) != 2 || task.Command != "train" || task.GPUUUIDs[0] != "GPU-n1-0" {
		t.Fatalf("task = %+v", task)
	}
	h.waitState(j.ID, api.StateAllocating)
	h.o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Started, At: time.Now(), PID: 42})
	h.waitState(j.ID, api.StateRunning)
	if cs := h.o.Cluster(context.Background()); cs.AllocatedGPUs != 2 || cs.Nodes[0].GPUs[0].Holder() != j.ID {
		t.Fatalf("cluster = %+v", cs)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Exited, At: time.Now(), ExitCode: 0})
	done := h.waitState(j.ID, api.StateCompleted)
	if done.ExitCode == nil || *done.ExitCode != 0 || done.FinishedAt == nil || done.StartedAt == nil {
		t.Fatalf("finished job = %+v", done)
	}
	var path []api.State
	for _, e := range done.Events {
		path = append(path, e.To)
	}
	want := []api.State{api.StateQueued, api.StateScheduled, api.StateAllocating, api.StateRunning, api.StateCompleted}
	if fmt.Sprint(path) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", path, want)
	}
	if cs := h.o.Cluster(context.Background()); cs.AllocatedGPUs != 0 {
		t.Fatalf("GPUs still allocated after the job ended: %+v", cs)
	}
}

func TestPriorityOrderAndGangWait(t *testing.T) {
	h := start(t, "", nil)
	h.o.SetScheduling(context.Background(), false)
	low := h.submit(api.SubmitRequest{Command: "low", GPUCount: gpus(8), Priority: api.RawValue(`"low"`)})
	high := h.submit(api.SubmitRequest{Command: "high", GPUCount: gpus(6), Priority: api.RawValue(`3`)})
	q := h.o.Queue()
	if len(q.QueuedJobs) != 2 || q.QueuedJobs[0].ID != high.ID || q.QueuedJobs[0].QueuePosition != 1 {
		t.Fatalf("queue = %+v", q.QueuedJobs)
	}
	if j, _ := h.o.Job(low.ID); j.PendingReason != "scheduling_stopped" {
		t.Fatalf("stopped scheduling not explained: %+v", j)
	}
	h.o.SetScheduling(context.Background(), true)
	if task := h.nextStart(); task.JobID != high.ID {
		t.Fatalf("started %s first, want the high-priority job", task.JobID)
	}
	h.noStart()
	j, _ := h.o.Job(low.ID)
	if j.PendingReason != "insufficient_gpus" || j.PendingMessage != "needs 8 GPUs on one node; the largest free block is 2 on n1" {
		t.Fatalf("why pending = %q %q", j.PendingReason, j.PendingMessage)
	}
	h.o.Sink(exec.Update{JobID: high.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 1})
	if task := h.nextStart(); task.JobID != low.ID || len(task.GPUs) != 8 {
		t.Fatalf("task = %+v, want the 8-GPU job", task)
	}
	if j := h.waitState(high.ID, api.StateFailed); j.Reason != api.ReasonExitCode {
		t.Fatalf("failed job reason = %q", j.Reason)
	}
}

func TestCancel(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	run := h.submit(api.SubmitRequest{Command: "run", GPUCount: gpus(8)})
	h.nextStart()
	queued := h.submit(api.SubmitRequest{Command: "wait", GPUCount: gpus(1)})

	j, stopping, err := h.o.Cancel(ctx, queued.ID, 0)
	if err != nil || stopping || j.State != api.StateCanceled {
		t.Fatalf("cancel queued: %+v %v %v", j, stopping, err)
	}
	j, stopping, err = h.o.Cancel(ctx, run.ID, 3*time.Second)
	if err != nil || !stopping || !j.CancelRequested {
		t.Fatalf("cancel running: %+v %v %v", j, stopping, err)
	}
	if c := <-h.ex.stops; c.jobID != run.ID || c.grace != 3*time.Second {
		t.Fatalf("stop call = %+v", c)
	}
	h.o.Sink(exec.Update{JobID: run.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 137, Signal: "killed"})
	h.waitState(run.ID, api.StateCanceled)
	if _, _, err := h.o.Cancel(ctx, run.ID, 0); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("cancel of a canceled job: %v, want a conflict", err)
	}
	if _, _, err := h.o.Cancel(ctx, "nope", 0); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("cancel of an unknown job: %v, want not found", err)
	}
}

func TestStaleUpdateIgnoredAndStartFailure(t *testing.T) {
	h := start(t, "", nil)
	h.ex.failFor["bad"] = errors.New(`workdir "/nope": no such file or directory`)
	bad := h.submit(api.SubmitRequest{Command: "bad", GPUCount: gpus(1)})
	if j := h.waitState(bad.ID, api.StateFailed); j.Reason != api.ReasonStartFailed || j.Message == "" {
		t.Fatalf("start failure = %+v", j)
	}
	ok := h.submit(api.SubmitRequest{Command: "ok", GPUCount: gpus(1)})
	h.nextStart()
	h.o.Sink(exec.Update{JobID: ok.ID, Attempt: 7, Kind: exec.Exited, At: time.Now()}) // another attempt's
	h.o.Sink(exec.Update{JobID: ok.ID, Attempt: 0, Kind: exec.Started, At: time.Now()})
	if j := h.waitState(ok.ID, api.StateRunning); j.State != api.StateRunning {
		t.Fatal(j.State)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	a, replayed, err := h.o.Submit(ctx, api.SubmitRequest{Command: "x", GPUCount: gpus(0)}, "key-1")
	if err != nil || replayed {
		t.Fatal(err, replayed)
	}
	b, replayed, err := h.o.Submit(ctx, api.SubmitRequest{Command: "x", GPUCount: gpus(0)}, "key-1")
	if err != nil || !replayed || b.ID != a.ID {
		t.Fatalf("retry gave %s (replayed %v, %v), want %s", b.ID, replayed, err, a.ID)
	}
	if n := len(h.o.Jobs(JobFilter{})); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}

func TestHoldBlocksJobs(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	hold, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "notebook", GPUCount: 2}, "")
	if err != nil || len(hold.Allocation) != 2 {
		t.Fatalf("hold: %+v %v", hold, err)
	}
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "more", GPUCount: 7}, ""); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("hold of 7 with 6 free: %v, want a conflict", err)
	}
	big := h.submit(api.SubmitRequest{Command: "big", GPUCount: gpus(8)})
	h.noStart()
	if cs := h.o.Cluster(ctx); cs.HeldGPUs != 2 || !cs.Nodes[0].GPUs[0].Held {
		t.Fatalf("cluster = %+v", cs)
	}
	if _, err := h.o.FeatureOps().Holds.Release(ctx, "notebook"); err != nil {
		t.Fatal(err)
	}
	if task := h.nextStart(); task.JobID != big.ID {
		t.Fatalf("started %s", task.JobID)
	}
	if _, err := h.o.FeatureOps().Holds.Release(ctx, "notebook"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("second release: %v", err)
	}
}

// TestRecoveryAfterCrash: jobs active when the server died are reaped, then
// requeued while retries remain, else failed with reason "lost"; holds and
// the policy survive.
func TestRecoveryAfterCrash(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	retry := h.submit(api.SubmitRequest{Command: "retry", GPUCount: gpus(4), MaxRetries: 2})
	once := h.submit(api.SubmitRequest{Command: "once", GPUCount: gpus(2)})
	h.nextStart()
	h.nextStart()
	h.o.Sink(exec.Update{JobID: retry.ID, Kind: exec.Started, At: time.Now()})
	h.waitState(retry.ID, api.StateRunning)
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "nb", GPUCount: 1}, ""); err != nil {
		t.Fatal(err)
	}
	h.o.SetPolicies(ctx, api.PoliciesUpdate{Policy: ptr("fcfs")})
	queued := h.submit(api.SubmitRequest{Command: "queued", GPUCount: gpus(8)})
	h.stop() // the loop stops as if killed: nothing more is written
	h.stop = nil

	var reaped map[string]bool
	h2 := start(t, h.path, func(ids map[string]bool) (int, error) { reaped = ids; return 0, nil })
	if !reaped[retry.ID] || !reaped[once.ID] || len(reaped) != 2 {
		t.Fatalf("reaped %v, want the two active jobs", reaped)
	}
	j, _ := h2.o.Job(retry.ID)
	requeued := false
	for _, e := range j.Events {
		requeued = requeued || (e.To == api.StateQueued && e.Reason == api.ReasonLost)
	}
	if j.RetryCount != 1 || !requeued || (j.State != api.StateQueued && !j.State.Active()) {
		t.Fatalf("job with retries = %+v", j)
	}
	j, _ = h2.o.Job(once.ID)
	if j.State != api.StateFailed || j.Reason != api.ReasonLost || j.FinishedAt == nil {
		t.Fatalf("job without retries = %+v", j)
	}
	if j, _ := h2.o.Job(queued.ID); j.State != api.StateQueued {
		t.Fatalf("queued job = %+v", j)
	}
	if p := h2.o.Policies(); p.Policy != "fcfs" {
		t.Fatalf("policy = %s after restart", p.Policy)
	}
	if cs := h2.o.Cluster(ctx); cs.HeldGPUs != 1 {
		t.Fatalf("hold lost: %+v", cs)
	}
	// The requeued job starts again as attempt 1 on free GPUs.
	task := h2.nextStart()
	if task.JobID != retry.ID || task.Attempt != 1 {
		t.Fatalf("restart task = %+v", task)
	}
}

func ptr[T any](v T) *T { return &v }

func (f *fakeExec) Notice(_ context.Context, id string, attempt int, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notices = append(f.notices, fmt.Sprintf("%s/%d: %s", id, attempt, text))
	return nil
}

// TestPreemptionFlow: a higher-priority job preempts a lower one, which is
// warned (notice, then stop with its grace), goes back to the queue as a new
// attempt when it ends, and runs again once there is room.
func TestPreemptionFlow(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	if _, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Policy: ptr("priority"), Preemption: ptr(true), MinRunTime: api.RawValue(`0`)}); err != nil {
		t.Fatal(err)
	}
	low := h.submit(api.SubmitRequest{Command: "low", User: "ana", GPUCount: gpus(8), Priority: api.RawValue(`"low"`), PreemptGrace: api.RawValue(`"5s"`)})
	h.nextStart()
	h.o.Sink(exec.Update{JobID: low.ID, Kind: exec.Started, At: time.Now()})
	h.waitState(low.ID, api.StateRunning)

	high := h.submit(api.SubmitRequest{Command: "high", User: "bob", GPUCount: gpus(4), Priority: api.RawValue(`"high"`)})
	stop := <-h.ex.stops
	if stop.jobID != low.ID || stop.attempt != 0 || stop.grace != 5*time.Second {
		t.Fatalf("stop = %+v, want the low job with its 5s grace", stop)
	}
	h.ex.mu.Lock()
	notices := append([]string{}, h.ex.notices...)
	h.ex.mu.Unlock()
	if len(notices) != 1 || !strings.Contains(notices[0], "preempted for job "+high.ID) {
		t.Fatalf("notices = %q", notices)
	}
	if j, _ := h.o.Job(low.ID); !j.Preempting || j.State != api.StateRunning {
		t.Fatalf("victim = %+v", j)
	}
	if j, _ := h.o.Job(high.ID); j.PendingReason != "preempting" {
		t.Fatalf("high job waits with %q: %s", j.PendingReason, j.PendingMessage)
	}

	h.o.Sink(exec.Update{JobID: low.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 143, Signal: "terminated"})
	if task := h.nextStart(); task.JobID != high.ID {
		t.Fatalf("started %s, want the high job", task.JobID)
	}
	j := h.waitState(low.ID, api.StateQueued)
	last := j.Events[len(j.Events)-1]
	if j.RetryCount != 1 || j.Preemptions != 1 || last.Reason != api.ReasonPreempted || j.Preempting || len(j.Allocation) != 0 || j.GPUSeconds <= 0 {
		t.Fatalf("requeued victim = %+v", j)
	}
	h.o.Sink(exec.Update{JobID: high.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 0})
	if task := h.nextStart(); task.JobID != low.ID || task.Attempt != 1 || !strings.HasSuffix(task.NoticePath, "/1.preempt") {
		t.Fatalf("restart = %+v, want the low job as attempt 1", task)
	}
}

func TestPoliciesValidateAndPersist(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	bad := map[string]api.PoliciesUpdate{
		"policy":           {Policy: ptr("nope")},
		"aging_interval":   {AgingInterval: api.RawValue(`"soon"`)},
		"min_run_time":     {MinRunTime: api.RawValue(`-5`)},
		"quotas.users":     {Quotas: &api.QuotasUpdate{Users: map[string]*int{"ana": ptr(-1)}}},
		"weights.projects": {Weights: &api.WeightsUpdate{Projects: map[string]*float64{"p": ptr(0.0)}}},
		"gang":             {Gang: ptr(false)},
	}
	for field, u := range bad {
		_, err := h.o.SetPolicies(ctx, u)
		var e *api.Error
		if !errors.As(err, &e) || e.Field != field || e.Status != 422 {
			t.Errorf("%s: err = %v, want a 422 naming the field", field, err)
		}
	}
	if p := h.o.Policies(); p.Policy != "fair_share" || !p.Backfill || p.Preemption {
		t.Fatalf("defaults changed by bad updates: %+v", p)
	}
	_, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Policy: ptr("sjf"), Spread: ptr(true), HalfLife: api.RawValue(`"24h"`),
		Quotas: &api.QuotasUpdate{Projects: map[string]*int{"vision": ptr(4)}}, Weights: &api.WeightsUpdate{Users: map[string]*float64{"ana": ptr(2.0)}}})
	if err != nil {
		t.Fatal(err)
	}
	h.o.SetPolicies(ctx, api.PoliciesUpdate{Quotas: &api.QuotasUpdate{Users: map[string]*int{"bob": ptr(2)}}})
	h.stop()
	h.stop = nil
	h2 := start(t, h.path, nil)
	p := h2.o.Policies()
	if p.Policy != "sjf" || !p.Spread || p.HalfLife != 86400 || p.Quotas.Projects["vision"] != 4 || p.Quotas.Users["bob"] != 2 || p.Weights.Users["ana"] != 2 {
		t.Fatalf("after restart: %+v", p)
	}
	h2.o.SetPolicies(ctx, api.PoliciesUpdate{Quotas: &api.QuotasUpdate{Users: map[string]*int{"bob": nil}}})
	if _, ok := h2.o.Policies().Quotas.Users["bob"]; ok {
		t.Fatal("null did not remove the quota")
	}
}

// TestQueueEstimates: the queue shows when a blocked job should start, from
// the running jobs' estimates.
func TestQueueEstimates(t *testing.T) {
	h := start(t, "", nil)
	running := h.submit(api.SubmitRequest{Command: "r", GPUCount: gpus(6), EstimatedDuration: api.RawValue(`"2h"`)})
	h.nextStart()
	h.o.Sink(exec.Update{JobID: running.ID, Kind: exec.Started, At: time.Now()})
	h.waitState(running.ID, api.StateRunning)
	big := h.submit(api.SubmitRequest{Command: "big", GPUCount: gpus(8)})
	h.waitCycle()
	q := h.o.Queue()
	if len(q.QueuedJobs) != 1 || q.QueuedJobs[0].ID != big.ID || q.QueuedJobs[0].EstimatedStartTime == nil {
		t.Fatalf("queue = %+v", q.QueuedJobs)
	}
	if w := *q.QueuedJobs[0].EstimatedWaitTime; w < 7100 || w > 7200 {
		t.Fatalf("estimated wait = %v s, want about 2h", w)
	}
}
