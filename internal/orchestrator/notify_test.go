package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// kickCounter is a Notifier that plans with a real planner and counts
// kicks.
type kickCounter struct {
	*notify.Planner
	mu    sync.Mutex
	kicks int
}

func (k *kickCounter) Kick() { k.mu.Lock(); k.kicks++; k.mu.Unlock() }

// TestNotificationsRideWithTheChange: each job change's notification is an
// outbox row committed with it (durable when the change is, read back
// from the store), and notes that are no transition (a time-limit
// warning, an admin alert) are committed by the next tick.
func TestNotificationsRideWithTheChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memstore.New()
	seal, _ := notify.NewSealer(make([]byte, 32))
	reg, err := notify.NewRegistry(ctx, &notify.MemStore{}, seal, nil)
	if err != nil {
		t.Fatal(err)
	}
	ana, err := reg.Add(ctx, api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/a", Scope: api.ScopeUser, User: "ana"}, "ana")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := reg.Add(ctx, api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/o", Scope: api.ScopeCluster}, "root")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(100000, 0).UTC()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	n := &kickCounter{Planner: notify.NewPlanner(reg, nil)}
	ex := newFakeExec()
	dataDir := t.TempDir()
	o, err := New(ctx, Config{Store: st, Executor: ex, Nodes: []Node{simNode("n1", 8)}, DataDir: dataDir, Tick: 10 * time.Millisecond,
		Now: clock, Notify: n})
	if err != nil {
		t.Fatal(err)
	}
	go o.Run(ctx)

	rows := func() []store.OutboxItem { return st.Outbox() }
	waitRows := func(what string, cond func([]store.OutboxItem) bool) []store.OutboxItem {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := rows()
			if cond(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: rows %+v", what, r)
			}
			changed := o.Changed()
			select {
			case <-changed:
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	kinds := func(r []store.OutboxItem, ep string) []string {
		var out []string
		for _, it := range r {
			if it.EndpointID == ep {
				out = append(out, it.Kind)
			}
		}
		return out
	}

	limit := `"100s"`
	j, _, err := o.Submit(ctx, api.SubmitRequest{User: "ana", Project: "nlp", Command: "train", GPUCount: new(2), Notify: "all",
		TimeLimit: api.RawValue(limit), Env: map[string]string{"HF_TOKEN": "hf_secret_value"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	task := <-ex.starts
	o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Started, At: clock(), PID: 42})
	waitRows("began", func(r []store.OutboxItem) bool { return slices.Contains(kinds(r, ana.ID), "job.began") })
	advance(81 * time.Second)
	waitRows("the 80% warning", func(r []store.OutboxItem) bool {
		return slices.Contains(kinds(r, ana.ID), "job.time_limit_warning")
	})
	os.MkdirAll(filepath.Dir(task.LogPath), 0o755)
	os.WriteFile(task.LogPath, []byte("step 1\nusing hf_secret_value\nTraceback: boom\n"), 0o644)
	o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Exited, At: clock(), ExitCode: 1})
	r := waitRows("failed", func(r []store.OutboxItem) bool { return slices.Contains(kinds(r, ana.ID), "job.failed") })
	if got := kinds(r, ana.ID); !slices.Equal(got, []string{"job.began", "job.time_limit_warning", "job.failed"}) {
		t.Errorf("ana's rows: %v", got)
	}
	for _, it := range r {
		if strings.Contains(it.Data, "hf_secret_value") {
			t.Errorf("a row holds the env value: %s", it.Data)
		}
	}
	// What the sender reads at delivery time.
	if tail := o.LogTail(j.ID, 0, 10); !slices.Equal(tail, []string{"step 1", "using hf_secret_value", "Traceback: boom"}) {
		t.Errorf("log tail %q", tail)
	}
	if env := o.JobEnv(j.ID); env["HF_TOKEN"] != "hf_secret_value" {
		t.Errorf("env %v", env)
	}

	// Admin alerts: a hot GPU (once, until it cools), a foreign process,
	// scheduling stopped.
	hot, cool := 95, 40
	o.NodeSeen("n1", []api.GPUReading{{Index: 3, Temperature: &hot}}, []api.ForeignProcess{{GPU: 5, PID: 777, User: "eve", Name: "miner"}}, clock())
	o.NodeSeen("n1", []api.GPUReading{{Index: 3, Temperature: &hot}}, []api.ForeignProcess{{GPU: 5, PID: 777}}, clock())
	o.NodeSeen("n1", []api.GPUReading{{Index: 3, Temperature: &cool, ECCErrors: 2}}, nil, clock())
	o.NodeDown("n1", clock())
	o.NodeSeen("n1", nil, nil, clock())
	o.NodeDisk("n1", "3% free, under --min-free-disk 5%")
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"alert.gpu_temperature", "alert.foreign_process", "alert.gpu_ecc", "alert.node_down", "alert.node_up", "alert.disk_full", "alert.scheduler_stopped"}
	r = waitRows("alerts", func(r []store.OutboxItem) bool { return len(kinds(r, ops.ID)) >= len(want) })
	got := kinds(r, ops.ID)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("cluster rows %v, want %v", got, want)
	}
	if slices.ContainsFunc(kinds(r, ana.ID), func(k string) bool { return strings.HasPrefix(k, "alert.") }) {
		t.Errorf("a user's endpoint got an admin alert")
	}
	n.mu.Lock()
	kicks := n.kicks
	n.mu.Unlock()
	if kicks == 0 {
		t.Errorf("the sender was never kicked")
	}
}

// TestNotifyArrayAndIdle: an array's tasks tell their failure, not their
// completions, and the array one summary once its last task ends; a job
// whose GPUs stay idle for the idle window is warned once.
func TestNotifyArrayAndIdle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seal, _ := notify.NewSealer(make([]byte, 32))
	reg, _ := notify.NewRegistry(ctx, &notify.MemStore{}, seal, nil)
	ana, err := reg.Add(ctx, api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/a", Scope: api.ScopeUser, User: "ana"}, "ana")
	if err != nil {
		t.Fatal(err)
	}
	ex := newFakeExec()
	o, err := New(ctx, Config{Store: st, Executor: ex, Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(), Tick: 10 * time.Millisecond,
		Notify: notify.NewPlanner(reg, nil)})
	if err != nil {
		t.Fatal(err)
	}
	go o.Run(ctx)
	rowsOf := func() []store.OutboxItem {
		r, _ := st.Outbox(ctx, store.OutboxFilter{Endpoints: []string{ana.ID}, Limit: 1000})
		slices.Reverse(r)
		return r
	}
	waitKind := func(kind string) store.OutboxItem {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, r := range rowsOf() {
				if r.Kind == kind {
					return r
				}
			}
			time.Sleep(10 * time.Millisecond) // poll the store: its rows are what is asserted
		}
		t.Fatalf("no %s row; rows %+v", kind, rowsOf())
		return store.OutboxItem{}
	}

	// An array of three tasks.
	first, _, err := o.Submit(ctx, api.SubmitRequest{User: "ana", Project: "nlp", Name: "sweep", Command: "task", GPUCount: new(1), Array: "0-2"}, "")
	if err != nil {
		t.Fatal(err)
	}
	aid := first.ArrayJobID
	ids := []string{aid + "_0", aid + "_1", aid + "_2"}
	for range ids {
		tk := <-ex.starts
		o.Sink(exec.Update{JobID: tk.JobID, Kind: exec.Started, At: time.Now(), PID: 1})
	}
	for i, id := range ids {
		code := 0
		if i == 1 {
			code = 2
		}
		o.Sink(exec.Update{JobID: id, Kind: exec.Exited, At: time.Now(), ExitCode: code})
	}
	sum := waitKind("array.finished")
	for _, w := range []string{`"tasks":3`, `"completed":2`, `"failed":1`, `"id":"` + aid + `"`, `"name":"sweep"`} {
		if !strings.Contains(sum.Data, w) {
			t.Errorf("the summary lacks %s: %s", w, sum.Data)
		}
	}
	var kinds []string
	for _, r := range rowsOf() {
		kinds = append(kinds, r.Kind)
	}
	if !slices.Equal(kinds, []string{"job.failed", "array.finished"}) {
		t.Errorf("rows %v, want the one failure and the summary", kinds)
	}

	// Idle: a running job whose GPU reads 0% for the idle window.
	if _, err := o.SetPolicies(ctx, api.PoliciesUpdate{IdleWindow: api.RawValue(`"1s"`)}); err != nil {
		t.Fatal(err)
	}
	j, _, err := o.Submit(ctx, api.SubmitRequest{User: "ana", Project: "nlp", Command: "idle", GPUCount: new(1)}, "")
	if err != nil {
		t.Fatal(err)
	}
	tk := <-ex.starts
	o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: time.Now(), PID: 1})
	deadline := time.Now().Add(10 * time.Second)
	for {
		o.NodeSeen("n1", []api.GPUReading{{Index: tk.GPUs[0], Utilization: 0}}, nil, time.Now())
		if v, _ := o.Job(j.ID); v.Idle || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // telemetry arrives over time: the idle window is measured in it
	}
	idle := waitKind("job.idle")
	if !strings.Contains(idle.Data, j.ID) {
		t.Errorf("idle row %s", idle.Data)
	}
	o.NodeSeen("n1", []api.GPUReading{{Index: tk.GPUs[0], Utilization: 0}}, nil, time.Now())
	time.Sleep(50 * time.Millisecond) // a later reading must not warn again; give the loop a tick
	n := 0
	for _, r := range rowsOf() {
		if r.Kind == "job.idle" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d idle warnings, want 1", n)
	}
}

// TestNotifyQueueWait: alert.queue_wait is raised once the queue wait p95
// (queued jobs' waits so far included) has stayed over the threshold for
// QueueWaitFor, not before, and once.
func TestNotifyQueueWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seal, _ := notify.NewSealer(make([]byte, 32))
	reg, _ := notify.NewRegistry(ctx, &notify.MemStore{}, seal, nil)
	ops, err := reg.Add(ctx, api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/o", Scope: api.ScopeCluster}, "root")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(200000, 0).UTC()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// The loop's tick is an hour: the test checks at the times it sets,
	// and commits what was noted with a change of its own.
	o, err := New(ctx, Config{Store: st, Executor: newFakeExec(), Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(), Tick: time.Hour,
		Now: clock, Notify: notify.NewPlanner(reg, nil), AlertQueueWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	go o.Run(ctx)
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Submit(ctx, api.SubmitRequest{User: "ana", Command: "x", GPUCount: new(1)}, ""); err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration) int {
		t.Helper()
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		o.mu.Lock() // what the notifications' tick does (notes.Flush)
		o.notes.CheckQueueWait(clock())
		o.mu.Unlock()
		if _, err := o.SetScheduling(ctx, false); err != nil { // a commit: it carries what was noted
			t.Fatal(err)
		}
		r, _ := st.Outbox(ctx, store.OutboxFilter{Endpoints: []string{ops.ID}, Limit: 100})
		n := 0
		for _, it := range r {
			if it.Kind == "alert.queue_wait" {
				n++
			}
		}
		return n
	}
	if n := step(30 * time.Minute); n != 0 {
		t.Fatalf("alerted under the threshold: %d", n)
	}
	if n := step(90 * time.Minute); n != 0 { // waited 2h: over from now
		t.Fatalf("alerted at once: %d", n)
	}
	if n := step(10 * time.Minute); n != 0 {
		t.Fatalf("alerted after 10 minutes over: %d", n)
	}
	if n := step(6 * time.Minute); n != 1 {
		t.Fatalf("after 16 minutes over: %d alerts, want 1", n)
	}
	if n := step(time.Hour); n != 1 {
		t.Fatalf("alerted again while still over: %d", n)
	}
}
