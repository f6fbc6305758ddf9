package agents

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

type fakeBook struct {
	mu       sync.Mutex
	seen     map[string]int
	readings []api.GPUReading     // the last sync's
	foreign  []api.ForeignProcess // the last sync's
}

func (b *fakeBook) RegisterNode(context.Context, api.AgentRegistration, string) error { return nil }
func (b *fakeBook) NodeSeen(id string, rs []api.GPUReading, fs []api.ForeignProcess, _ time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[id]++
	b.readings, b.foreign = rs, fs
}

type recorder struct{ ch chan exec.Update }

func newPool(t *testing.T) (*Pool, *recorder) {
	t.Helper()
	rec := &recorder{ch: make(chan exec.Update, 16)}
	p := New(Config{Sink: func(u exec.Update) { rec.ch <- u }, Book: &fakeBook{seen: map[string]int{}}})
	return p, rec
}

func (r *recorder) next(t *testing.T) exec.Update {
	t.Helper()
	select {
	case u := <-r.ch:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update")
	}
	return exec.Update{}
}

func register(t *testing.T, p *Pool, node string, tasks ...api.TaskStatus) {
	t.Helper()
	if tasks == nil {
		tasks = []api.TaskStatus{}
	}
	if _, err := p.Register(context.Background(), api.AgentRegistration{NodeID: node, AgentID: agentIDOf(node), Address: node + ".lan", Tasks: tasks}, "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
}

// agentIDOf is the agent id the tests' agent of node uses.
func agentIDOf(node string) string { return "agent-of-" + node + "-0123456789" }

func sync1(t *testing.T, p *Pool, node string, tasks ...api.TaskStatus) api.AgentWork {
	t.Helper()
	w, err := p.Sync(context.Background(), api.AgentReport{NodeID: node, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// startGang registers nodes a and b, starts gangTask on them and syncs
// each once; it returns the work each got.
func startGang(t *testing.T) (p *Pool, rec *recorder, wa, wb api.AgentWork) {
	t.Helper()
	p, rec = newPool(t)
	register(t, p, "a")
	register(t, p, "b")
	if err := p.Start(context.Background(), gangTask()); err != nil {
		t.Fatal(err)
	}
	return p, rec, sync1(t, p, "a"), sync1(t, p, "b")
}

func gangTask() exec.Task {
	return exec.Task{JobID: "j1", Attempt: 0, Command: "train", Ranks: []exec.Rank{
		{NodeID: "a", GPUs: []int{0, 1}}, {NodeID: "b", GPUs: []int{2, 3}}}}
}

// soloTask is gangTask's first rank alone: a one-node job on node a.
func soloTask() exec.Task {
	task := gangTask()
	task.Ranks = task.Ranks[:1]
	return task
}

// startSolo starts soloTask on p and returns it.
func startSolo(p *Pool) exec.Task {
	task := soloTask()
	p.Start(context.Background(), task)
	return task
}

func running(rank int) api.TaskStatus {
	return api.TaskStatus{JobID: "j1", Rank: rank, State: api.TaskRunning, PID: 100 + rank}
}

func exited(rank, code int) api.TaskStatus {
	return api.TaskStatus{JobID: "j1", Rank: rank, State: api.TaskExited, ExitCode: code}
}

func TestGangLifecycle(t *testing.T) {
	p, rec, wa, wb := startGang(t)
	if len(wa.Tasks) != 1 || len(wb.Tasks) != 1 {
		t.Fatalf("work a=%+v b=%+v", wa, wb)
	}
	ra, rb := wa.Tasks[0], wb.Tasks[0]
	if ra.Rank != 0 || rb.Rank != 1 || rb.NumNodes != 2 || rb.MasterAddr != "a.lan" || rb.MasterPort != ra.MasterPort || rb.MasterPort < 29500 {
		t.Fatalf("rank specs = %+v / %+v", ra, rb)
	}
	sync1(t, p, "a", running(0))
	select {
	case u := <-rec.ch:
		t.Fatalf("started with one rank of two: %+v", u)
	default:
	}
	sync1(t, p, "b", running(1))
	if u := rec.next(t); u.Kind != exec.Started || u.PID != 100 {
		t.Fatalf("update = %+v", u)
	}
	// Rank 1 fails: rank 0 is told to stop; the gang exits with rank 1's code.
	sync1(t, p, "b", exited(1, 3))
	if w := sync1(t, p, "a", running(0)); len(w.Tasks) != 1 || !w.Tasks[0].Stop {
		t.Fatalf("rank 0 not stopped: %+v", w)
	}
	sync1(t, p, "a", api.TaskStatus{JobID: "j1", Rank: 0, State: api.TaskExited, ExitCode: 143, Signal: "terminated"})
	if u := rec.next(t); u.Kind != exec.Exited || u.ExitCode != 3 || u.Lost != "" {
		t.Fatalf("exit = %+v, want rank 1's code 3", u)
	}
	p.Settled("j1", 0) // the orchestrator committed the end
	if w := sync1(t, p, "a"); len(w.Tasks) != 0 {
		t.Fatalf("finished task still wanted: %+v", w)
	}
}

// An ended task stays in its node's desired state, marked stop, until the
// orchestrator has committed its end (Settled): its agent keeps the
// task's record meanwhile, and a server killed before the commit hears
// the end again, with its exit code, from the agent that adopts it.
// Repeated reports of the end are not news; the settlement drops it.
func TestEndedTaskKeptUntilSettled(t *testing.T) {
	p, rec := newPool(t)
	register(t, p, "a")
	startSolo(p)
	sync1(t, p, "a", running(0))
	if u := rec.next(t); u.Kind != exec.Started {
		t.Fatalf("update %+v; want started", u)
	}
	w := sync1(t, p, "a", exited(0, 3))
	if u := rec.next(t); u.Kind != exec.Exited || u.ExitCode != 3 {
		t.Fatalf("update %+v; want exited 3", u)
	}
	if len(w.Tasks) != 1 || !w.Tasks[0].Stop {
		t.Fatalf("work after the end, before it is settled: %+v; want the task kept, marked stop", w.Tasks)
	}
	register(t, p, "a", exited(0, 3)) // the agent restarts with the record
	sync1(t, p, "a", exited(0, 3))
	p.Settled("j1", 7) // another attempt: nothing
	if w := sync1(t, p, "a", exited(0, 3)); len(w.Tasks) != 1 {
		t.Fatalf("work %+v; want the task kept until its own attempt is settled", w.Tasks)
	}
	p.Settled("j1", 0)
	if w := sync1(t, p, "a", exited(0, 3)); len(w.Tasks) != 0 {
		t.Fatalf("work after the settlement %+v; want none", w.Tasks)
	}
	select {
	case u := <-rec.ch:
		t.Fatalf("the end was reported again: %+v", u)
	default:
	}
}

// An attempt whose agents came back without it before any of its ranks
// was seen running never started: it is lost with Unstarted set, so that
// the orchestrator requeues it without counting a retry. One seen
// running, or a gang with a rank still unaccounted for, is lost as ever.
func TestRegisterWithoutTaskThatNeverRan(t *testing.T) {
	tests := []struct {
		name      string
		run       func(t *testing.T, p *Pool) // after the adoption
		unstarted bool
	}{
		{"adopted, never reported", func(t *testing.T, p *Pool) {
			register(t, p, "a")
		}, true},
		{"reported running, then the agent came back without it", func(t *testing.T, p *Pool) {
			register(t, p, "a", running(0))
			register(t, p, "a")
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, rec := newPool(t)
			p.Adopt(context.Background(), soloTask())
			tc.run(t, p)
			var u exec.Update
			for u = rec.next(t); u.Kind != exec.Exited; u = rec.next(t) {
			}
			if u.Lost != api.ReasonLost || u.Unstarted != tc.unstarted {
				t.Fatalf("update %+v; want lost with unstarted %v", u, tc.unstarted)
			}
			if w := sync1(t, p, "a"); len(w.Tasks) != 0 {
				t.Fatalf("work %+v; want none (the agent has nothing of it to keep)", w.Tasks)
			}
		})
	}
	// A gang: one node comes back without its rank, the other reports
	// its rank running and then its end: it ran.
	p, rec := newPool(t)
	p.Adopt(context.Background(), gangTask())
	register(t, p, "a")
	register(t, p, "b", running(1))
	sync1(t, p, "b", exited(1, 143))
	var u exec.Update
	for u = rec.next(t); u.Kind != exec.Exited; u = rec.next(t) {
	}
	if u.Unstarted {
		t.Fatalf("gang exit %+v; want it not unstarted (rank 1 ran)", u)
	}
}

func TestRegisterWithoutDeliveredTaskIsLost(t *testing.T) {
	p, rec := newPool(t)
	register(t, p, "a")
	startSolo(p)
	sync1(t, p, "a")    // delivered
	register(t, p, "a") // the agent restarted and does not have it
	if u := rec.next(t); u.Kind != exec.Exited || u.Lost != api.ReasonLost {
		t.Fatalf("update = %+v, want lost", u)
	}
}

func TestAdoptedTaskSurvivesRegistration(t *testing.T) {
	p, rec := newPool(t)
	task := soloTask()
	p.Adopt(context.Background(), task)
	register(t, p, "a", running(0))
	if u := rec.next(t); u.Kind != exec.Started {
		t.Fatalf("update = %+v", u)
	}
	if w := sync1(t, p, "a", running(0)); len(w.Tasks) != 1 || w.Tasks[0].Stop {
		t.Fatalf("adopted task not kept: %+v", w)
	}
}

// An attempt adopted after a server restart keeps the start its agent
// reports from before the restart: the server dates a start no earlier
// than the attempt was handed out, and an adopted one was handed out when
// it was placed (exec.Task.Placed), not when this server started; with no
// Placed, the start is dated from the adoption.
func TestAdoptedTaskKeepsItsStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		placed time.Duration // before now; 0: no Placed
		want   time.Duration // the Started update, before now
	}{
		{"placed before the restart", 2 * time.Minute, time.Minute},
		{"no placement time", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, rec := newPool(t)
			task := soloTask()
			if tc.placed > 0 {
				task.Placed = time.Now().Add(-tc.placed)
			}
			p.Adopt(context.Background(), task)
			agentNow := time.Now()
			started := agentNow.Add(-time.Minute) // before the restart
			ts := running(0)
			ts.StartedAt = &started
			if _, err := p.Register(context.Background(), api.AgentRegistration{NodeID: "a", AgentID: agentIDOf("a"), Address: "a.lan",
				Tasks: []api.TaskStatus{ts}, Now: &agentNow}, "10.0.0.1"); err != nil {
				t.Fatal(err)
			}
			u := rec.next(t)
			if ago := time.Since(u.At); u.Kind != exec.Started || ago < tc.want || ago > tc.want+5*time.Second {
				t.Fatalf("update %+v (%s ago); want Started %s ago", u, ago, tc.want)
			}
		})
	}
}

func TestSyncLongPollsUntilWork(t *testing.T) {
	p, _ := newPool(t)
	register(t, p, "a")
	w := sync1(t, p, "a")
	done := make(chan api.AgentWork, 1)
	go func() {
		w2, _ := p.Sync(context.Background(), api.AgentReport{NodeID: "a", Generation: w.Generation, Wait: 30})
		done <- w2
	}()
	startSolo(p)
	select {
	case w2 := <-done:
		if len(w2.Tasks) != 1 {
			t.Fatalf("work = %+v", w2)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not return when work arrived")
	}
	if _, err := p.Sync(context.Background(), api.AgentReport{NodeID: "zz"}); err != ErrUnknownNode {
		t.Fatalf("unknown node: %v", err)
	}
}

// A gang whose ranks ended before any report saw them running (a quick
// command, a slow sync) still started: Started comes before Exited, dated
// when the last rank started (by the agent's clock, measured back from
// the server's).
func TestGangThatEndedUnseenStarted(t *testing.T) {
	p, rec, _, _ := startGang(t)
	agentNow := time.Now().Add(time.Hour) // the agents' clocks are an hour ahead
	t0 := agentNow.Add(-50 * time.Millisecond)
	e0, e1 := exited(0, 0), exited(1, 0)
	e0.StartedAt, e1.StartedAt = &t0, &t0
	for node, ts := range map[string]api.TaskStatus{"a": e0, "b": e1} {
		if _, err := p.Sync(context.Background(), api.AgentReport{NodeID: node, Tasks: []api.TaskStatus{ts}, Now: &agentNow}); err != nil {
			t.Fatal(err)
		}
	}
	if u := rec.next(t); u.Kind != exec.Started || time.Since(u.At) < 0 || time.Since(u.At) > 5*time.Second {
		t.Fatalf("first update %+v; want Started about 50ms ago by the server's clock", u)
	}
	if u := rec.next(t); u.Kind != exec.Exited || u.ExitCode != 0 || u.Err != nil {
		t.Fatalf("second update %+v; want a clean exit", u)
	}
}

// A rank that could not start at all does not make the gang started.
func TestGangThatNeverRanDidNotStart(t *testing.T) {
	p, rec, _, _ := startGang(t)
	bad := exited(0, -1)
	bad.Error = "workdir \"/nope\": not a directory one can enter"
	sync1(t, p, "a", bad)
	sync1(t, p, "b", exited(1, 143))
	if u := rec.next(t); u.Kind != exec.Exited || u.Err == nil || u.Lost != "" {
		t.Fatalf("update %+v; want an exit that failed to start", u)
	}
}

// Two agents may not hold one node id: while the first is heard from
// within the TTL, a second one (another agent id) is refused with
// node_in_use and nothing changes; the first may register again (a
// restart keeps its id); once the first has been silent for the TTL, the
// second may take over.
func TestNodeHeldByAnotherAgent(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	p := New(Config{Sink: func(exec.Update) {}, Book: &fakeBook{seen: map[string]int{}}, NodeTTL: 30 * time.Second, Now: clock})
	reg := func(agentID string) error {
		_, err := p.Register(context.Background(), api.AgentRegistration{NodeID: "n1", AgentID: agentID, Tasks: []api.TaskStatus{}}, "10.0.0.1")
		return err
	}
	if err := reg(agentIDOf("agent-a")); err != nil {
		t.Fatal(err)
	}
	advance(10 * time.Second)
	if _, err := p.Sync(context.Background(), api.AgentReport{NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	advance(20 * time.Second) // 20s since a's last sync
	err := reg(agentIDOf("agent-b"))
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != "node_in_use" {
		t.Fatalf("a second agent for a live node: %v; want 409 node_in_use", err)
	}
	if err := reg(agentIDOf("agent-a")); err != nil {
		t.Fatalf("the holder registering again (a restart): %v", err)
	}
	advance(31 * time.Second)
	if err := reg(agentIDOf("agent-b")); err != nil {
		t.Fatalf("a second agent once the first was silent past the TTL: %v", err)
	}
	if err := reg(agentIDOf("agent-a")); err == nil {
		t.Fatal("the old agent took the node back from its live successor")
	}
}

// A task its agent reports preparing (fetching its image) has not
// started: no Started update, and a registration that lists it keeps it
// (not lost). Once it runs, its start carries the image's digest.
func TestPreparingTaskIsListedNotStarted(t *testing.T) {
	p, rec := newPool(t)
	register(t, p, "a")
	task := soloTask()
	task.Image, task.Mounts = "localhost/x:1", []string{"/d:/d:ro"}
	p.Start(context.Background(), task)
	w := sync1(t, p, "a")
	if len(w.Tasks) != 1 || w.Tasks[0].Image != "localhost/x:1" || len(w.Tasks[0].Mounts) != 1 {
		t.Fatalf("work %+v: the image and mounts do not reach the agent", w)
	}
	preparing := api.TaskStatus{JobID: "j1", Rank: 0, State: api.TaskPreparing}
	sync1(t, p, "a", preparing)
	register(t, p, "a", preparing) // e.g. the server forgot the node meanwhile
	select {
	case u := <-rec.ch:
		t.Fatalf("update %+v for a task still preparing", u)
	default:
	}
	r := running(0)
	r.ImageDigest = "localhost/x@sha256:ab"
	sync1(t, p, "a", r)
	if u := rec.next(t); u.Kind != exec.Started || u.ImageDigest != "localhost/x@sha256:ab" {
		t.Fatalf("update %+v, want Started with the digest", u)
	}
}
