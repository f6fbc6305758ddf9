package orchestrator

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// startLimited runs an orchestrator with limits and a fast tick.
func startLimited(t *testing.T, l Limits) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ex := newFakeExec()
	o, err := New(ctx, Config{Store: memstore.New(), Executor: ex, Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(),
		Tick: 20 * time.Millisecond, CancelGrace: 3 * time.Second, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	h := &harness{t: t, o: o, ex: ex}
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// TestTimeLimit: a running job past its time limit is stopped like a
// cancel and ends failed with reason time_limit.
func TestTimeLimit(t *testing.T) {
	h := startLimited(t, Limits{MaxRunTime: time.Hour})
	j := h.submit(api.SubmitRequest{Command: "sleep 100", GPUCount: gpus(1), TimeLimit: api.RawValue(`"300ms"`)})
	if j.TimeLimit == nil || j.TimeLimit.Duration() != 300*time.Millisecond {
		t.Fatalf("time_limit = %v", j.TimeLimit)
	}
	h.nextStart()
	started := time.Now()
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: started, PID: 42})
	select {
	case s := <-h.ex.stops:
		if s.jobID != j.ID || s.grace != 3*time.Second {
			t.Fatalf("stop %+v", s)
		}
		if d := time.Since(started); d < 300*time.Millisecond {
			t.Fatalf("stopped after %v, before its limit", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the job was not stopped at its time limit")
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 143, Signal: "terminated"})
	got := h.waitState(j.ID, api.StateFailed)
	if got.Reason != api.ReasonTimeLimit || !got.TimedOut {
		t.Fatalf("ended %s %q (%s)", got.State, got.Reason, got.Message)
	}
	// The default limit is the server's, and no job may ask for more.
	d := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(0)})
	if d.TimeLimit == nil || d.TimeLimit.Duration() != time.Hour {
		t.Fatalf("default time_limit = %v", d.TimeLimit)
	}
	_, _, err := h.o.Submit(context.Background(), api.SubmitRequest{Command: "x", GPUCount: gpus(0), TimeLimit: api.RawValue(`"2h"`)}, "")
	if !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != "time_limit" {
		t.Fatalf("2h over a 1h maximum: %v", err)
	}
}

// TestQueueLimits: the global queue size applies to everyone, the
// per-user one to non-exempt callers, the GPU maximum to every job.
func TestQueueLimits(t *testing.T) {
	h := startLimited(t, Limits{MaxQueueSize: 3, MaxQueuedPerUser: 2, MaxGPUsPerJob: 4})
	ctx := context.Background()
	if _, err := h.o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	sub := func(user string, n int, exempt bool) error {
		_, _, err := h.o.SubmitWith(ctx, api.SubmitRequest{User: user, Command: "x", GPUCount: gpus(n)}, SubmitOptions{Exempt: exempt})
		return err
	}
	code := func(err error) string {
		if err == nil {
			return ""
		}
		return api.AsError(err).Code
	}
	steps := []struct {
		user   string
		gpus   int
		exempt bool
		want   string
	}{
		{"ana", 5, false, "invalid_field"}, // over the per-job maximum
		{"ana", 4, false, ""},
		{"ana", 1, false, ""},
		{"ana", 1, false, "user_queue_full"},
		{"ana", 1, true, ""}, // an admin's submission for ana
		{"bob", 1, false, "queue_full"},
		{"bob", 1, true, "queue_full"},
	}
	for i, s := range steps {
		if got := code(sub(s.user, s.gpus, s.exempt)); got != s.want {
			t.Errorf("step %d (%s, %d GPUs, exempt %v): %q, want %q", i, s.user, s.gpus, s.exempt, got, s.want)
		}
	}
}

// TestQueuedPerUserFollowsQueue: the per-user count checkLimits reads is
// kept in step with the queue as jobs are submitted, canceled, started
// and recovered after a restart.
func TestQueuedPerUserFollowsQueue(t *testing.T) {
	h := startLimited(t, Limits{MaxQueuedPerUser: 2})
	ctx := context.Background()
	if _, err := h.o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	sub := func(user string) (string, error) {
		j, _, err := h.o.SubmitWith(ctx, api.SubmitRequest{User: user, Command: "x", GPUCount: gpus(8)}, SubmitOptions{})
		return j.ID, err
	}
	a1, err := sub("ana")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub("ana"); err != nil {
		t.Fatal(err)
	}
	if _, err := sub("bob"); err != nil {
		t.Fatal(err)
	}
	checkQueuedBy(t, h.o, map[string]int{"ana": 2, "bob": 1})
	if _, err := sub("ana"); api.AsError(err).Code != "user_queue_full" {
		t.Fatalf("ana's third job: %v, want user_queue_full", err)
	}
	if _, _, err := h.o.Cancel(ctx, a1, 0); err != nil {
		t.Fatal(err)
	}
	checkQueuedBy(t, h.o, map[string]int{"ana": 1, "bob": 1})
	if _, err := sub("ana"); err != nil {
		t.Fatalf("ana's job after a cancel: %v", err)
	}
	// One 8-GPU job starts: it leaves the queue.
	if _, err := h.o.SetScheduling(ctx, true); err != nil {
		t.Fatal(err)
	}
	h.nextStart()
	got, _ := queuedBy(h.o)
	if got["ana"]+got["bob"] != 2 {
		t.Errorf("after one start: %v, want 2 queued in all", got)
	}
	checkQueuedBy(t, h.o, got)

	// After a restart the counts are rebuilt from the store.
	r := start(t, "", nil)
	if _, err := r.o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	r.submit(api.SubmitRequest{User: "cy", Command: "x", GPUCount: gpus(1)})
	r.submit(api.SubmitRequest{User: "cy", Command: "x", GPUCount: gpus(1)})
	path := r.path
	r.stop()
	r.stop = nil
	r2 := start(t, path, nil)
	checkQueuedBy(t, r2.o, map[string]int{"cy": 2})
}

// queuedBy copies the orchestrator's per-user counts of the users given
// and of those with queued jobs, and reports whether they add up to the
// queue's length.
func queuedBy(o *Orchestrator, users ...string) (map[string]int, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	m, total := map[string]int{}, 0
	for j := range o.jobs.QueuedJobs() {
		users = append(users, j.User)
	}
	for _, u := range users {
		if n := o.jobs.QueuedBy(u); n > 0 && m[u] == 0 {
			m[u] = n
			total += n
		}
	}
	return m, total == o.jobs.Queued()
}

// checkQueuedBy checks the per-user counts against want and against a
// count of the queue itself.
func checkQueuedBy(t *testing.T, o *Orchestrator, want map[string]int) {
	t.Helper()
	o.mu.RLock()
	counted := map[string]int{}
	for j := range o.jobs.QueuedJobs() {
		counted[j.User]++
	}
	o.mu.RUnlock()
	got, sum := queuedBy(o, slices.Collect(maps.Keys(want))...)
	if !maps.Equal(got, want) || !maps.Equal(got, counted) || !sum {
		t.Errorf("queued per user %v, want %v (the queue holds %v)", got, want, counted)
	}
}

// TestTimeLimitOnTime: a job is stopped at its time limit, not at the
// next tick after it ("kills happen on time"): with a tick of an
// hour, a 300ms limit still stops the job within a few hundred ms of it.
func TestTimeLimitOnTime(t *testing.T) {
	h := startConfig(t, filepath.Join(t.TempDir(), "corral.db"), Config{Nodes: []Node{simNode("n1", 2)}, Tick: time.Hour, CancelGrace: time.Second})
	j := h.submit(api.SubmitRequest{Command: "sleep 100", GPUCount: gpus(1), TimeLimit: api.RawValue(`"300ms"`)})
	h.nextStart()
	started := time.Now()
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: started, PID: 42})
	select {
	case s := <-h.ex.stops:
		d := time.Since(started)
		if s.jobID != j.ID || d < 300*time.Millisecond || d > 1500*time.Millisecond {
			t.Fatalf("stop %+v after %v; want it at the 300ms limit", s, d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the job was not stopped at its time limit (only at the next tick)")
	}
}
