package agents

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// These tests treat the agent as hostile: it holds the join token, not the
// server's trust.

// fakeClock is a settable clock for a pool.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClockedPool(t *testing.T) (*Pool, *recorder, *fakeBook, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	rec := &recorder{ch: make(chan exec.Update, 16)}
	book := &fakeBook{seen: map[string]int{}}
	p := New(Config{Sink: func(u exec.Update) { rec.ch <- u }, Book: book, NodeTTL: 30 * time.Second, Now: clk.Now})
	return p, rec, book, clk
}

func wantAPIError(t *testing.T, err error, status int, code, field string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Status != status || (code != "" && e.Code != code) || e.Field != field {
		t.Fatalf("error %v; want %d %s naming field %q", err, status, code, field)
	}
}

// A take-over attempt: a holder of the join token registers a live
// node's id with no agent id (or its own). It is refused, gets no session
// and no task, and the real agent's task is neither lost nor taken from it.
func TestTakeOverOfLiveNodeRefused(t *testing.T) {
	p, rec, _, clk := newClockedPool(t)
	register(t, p, "a")
	startSolo(p)
	if w := sync1(t, p, "a", running(0)); len(w.Tasks) != 1 {
		t.Fatalf("holder's work = %+v", w)
	}
	if u := rec.next(t); u.Kind != exec.Started {
		t.Fatalf("update = %+v", u)
	}
	clk.advance(10 * time.Second)
	for _, agentID := range []string{"", "someone-else-0123456789"} {
		_, err := p.Register(context.Background(), api.AgentRegistration{NodeID: "a", AgentID: agentID, Tasks: []api.TaskStatus{}}, "10.6.6.6")
		if agentID == "" {
			wantAPIError(t, err, 422, "", "agent_id")
		} else {
			wantAPIError(t, err, 409, "node_in_use", "node_id")
		}
	}
	select {
	case u := <-rec.ch:
		t.Fatalf("a refused registration changed the job: %+v", u)
	default:
	}
	w := sync1(t, p, "a", running(0))
	if len(w.Tasks) != 1 || w.Tasks[0].JobID != "j1" || w.Tasks[0].Stop {
		t.Fatalf("the holder lost its task to a refused newcomer: %+v", w)
	}
	if p.nodes["a"].agentID != agentIDOf("a") || p.nodes["a"].from != "10.0.0.1" {
		t.Fatalf("the node's holder changed: %+v", p.nodes["a"])
	}
}

func TestRegistrationOutOfBoundsRefused(t *testing.T) {
	gpus := func(gs ...api.AgentGPU) []api.AgentGPU { return gs }
	g := func(i int, uuid string, mib int64, peers ...int) api.AgentGPU {
		return api.AgentGPU{Index: i, UUID: uuid, Model: "H100", MemoryMiB: mib, NVLinkPeers: peers}
	}
	many := make([]api.AgentGPU, 65)
	for i := range many {
		many[i] = g(i, "GPU-"+strings.Repeat("x", i+1), 81920)
	}
	cases := map[string]struct {
		mutate func(*api.AgentRegistration)
		field  string
	}{
		"no agent id":            {func(r *api.AgentRegistration) { r.AgentID = "" }, "agent_id"},
		"guessable agent id":     {func(r *api.AgentRegistration) { r.AgentID = "a" }, "agent_id"},
		"agent id with a slash":  {func(r *api.AgentRegistration) { r.AgentID = "../../0123456789abcdef" }, "agent_id"},
		"65 GPUs":                {func(r *api.AgentRegistration) { r.GPUs = many }, "gpus"},
		"2^62 MiB":               {func(r *api.AgentRegistration) { r.GPUs = gpus(g(0, "A", 81920), g(1, "B", 1<<62)) }, "gpus[1].memory_mib"},
		"negative memory":        {func(r *api.AgentRegistration) { r.GPUs = gpus(g(0, "A", -1)) }, "gpus[0].memory_mib"},
		"negative index":         {func(r *api.AgentRegistration) { r.GPUs = gpus(g(-1, "A", 1)) }, "gpus[0].index"},
		"duplicate index":        {func(r *api.AgentRegistration) { r.GPUs = gpus(g(0, "A", 1), g(0, "B", 1)) }, "gpus[1].index"},
		"duplicate uuid":         {func(r *api.AgentRegistration) { r.GPUs = gpus(g(0, "A", 1), g(1, "B", 1), g(2, "A", 1)) }, "gpus[2].uuid"},
		"peer that is not a GPU": {func(r *api.AgentRegistration) { r.GPUs = gpus(g(0, "A", 1, 7)) }, "gpus[0].nvlink_peers"},
		"itself as a peer":       {func(r *api.AgentRegistration) { r.GPUs = gpus(g(0, "A", 1), g(1, "B", 1, 1)) }, "gpus[1].nvlink_peers"},
		"task without a job":     {func(r *api.AgentRegistration) { r.Tasks = []api.TaskStatus{{State: api.TaskRunning}} }, "tasks[0].job_id"},
		"task with negative rank": {func(r *api.AgentRegistration) {
			r.Tasks = []api.TaskStatus{{JobID: "j", Rank: -1, State: api.TaskRunning}}
		}, "tasks[0].rank"},
		"task in no state": {func(r *api.AgentRegistration) { r.Tasks = []api.TaskStatus{{JobID: "j", State: "dancing"}} }, "tasks[0].state"},
		"task listed twice": {func(r *api.AgentRegistration) {
			r.Tasks = []api.TaskStatus{{JobID: "j", State: api.TaskRunning}, {JobID: "j", State: api.TaskExited}}
		}, "tasks[1].job_id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _, _, _ := newClockedPool(t)
			reg := api.AgentRegistration{NodeID: "n1", AgentID: agentIDOf("n1"), GPUs: gpus(g(0, "A", 81920)), Tasks: []api.TaskStatus{}}
			tc.mutate(&reg)
			_, err := p.Register(context.Background(), reg, "10.0.0.1")
			wantAPIError(t, err, 422, "invalid_field", tc.field)
			if n := p.nodes["n1"]; n != nil && n.registered {
				t.Fatal("a refused registration registered the node")
			}
		})
	}
	t.Run("64 GPUs of 80 GiB with NVLink are fine", func(t *testing.T) {
		p, _, _, _ := newClockedPool(t)
		reg := api.AgentRegistration{NodeID: "n1", AgentID: agentIDOf("n1"), GPUs: many[:64], Tasks: []api.TaskStatus{}}
		reg.GPUs[0].NVLinkPeers = []int{1, 2}
		if _, err := p.Register(context.Background(), reg, "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("--max-gpus-per-node raises the limit", func(t *testing.T) {
		p := New(Config{Sink: func(exec.Update) {}, Book: &fakeBook{seen: map[string]int{}}, MaxGPUs: 65})
		reg := api.AgentRegistration{NodeID: "n1", AgentID: agentIDOf("n1"), GPUs: many, Tasks: []api.TaskStatus{}}
		if _, err := p.Register(context.Background(), reg, "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
	})
}

// Out-of-range readings are dropped, the rest kept; the sync itself
// succeeds, so a broken sensor costs the node no job.
func TestSyncDropsReadingsOutOfBounds(t *testing.T) {
	p, _, book, _ := newClockedPool(t)
	reg := api.AgentRegistration{NodeID: "n1", AgentID: agentIDOf("n1"), Tasks: []api.TaskStatus{}, GPUs: []api.AgentGPU{
		{Index: 0, UUID: "A", MemoryMiB: 1000}, {Index: 1, UUID: "B", MemoryMiB: 1000}}}
	if _, err := p.Register(context.Background(), reg, "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	temp := func(c int) *int { return &c }
	good := api.GPUReading{Index: 1, Utilization: 100, MemoryUsedMiB: 1000, Temperature: temp(-40)}
	cases := map[string]api.GPUReading{
		"negative utilisation":              {Index: 0, Utilization: -5},
		"utilisation past 100":              {Index: 0, Utilization: 101},
		"10,000 °C":                         {Index: 0, Temperature: temp(10000)},
		"-41 °C":                            {Index: 0, Temperature: temp(-41)},
		"more memory used than the GPU has": {Index: 0, MemoryUsedMiB: 1001},
		"negative memory used":              {Index: 0, MemoryUsedMiB: -1},
		"a GPU the node does not have":      {Index: 7, Utilization: 50},
		"the good GPU read twice":           {Index: 1, Utilization: 3},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := p.Sync(context.Background(), api.AgentReport{NodeID: "n1", Telemetry: []api.GPUReading{good, bad},
				Foreign: []api.ForeignProcess{{GPU: 9, PID: 4}, {GPU: 0, PID: -1}, {GPU: 0, PID: 42, Name: strings.Repeat("x", 10_000)}}})
			if err != nil {
				t.Fatalf("a sync with a bad reading was refused: %v", err)
			}
			book.mu.Lock()
			defer book.mu.Unlock()
			if len(book.readings) != 1 || book.readings[0].Index != 1 || book.readings[0].Utilization != 100 {
				t.Fatalf("readings kept = %+v; want the good one alone", book.readings)
			}
			if len(book.foreign) != 1 || book.foreign[0].PID != 42 || len(book.foreign[0].Name) > maxForeignName+8 {
				t.Fatalf("foreign kept = %+v; want pid 42 on GPU 0 alone", book.foreign)
			}
		})
	}
}

// Task reports no agent would make are dropped from a sync, the rest
// applied: the node keeps its jobs.
func TestSyncDropsMalformedTasks(t *testing.T) {
	p, rec, _, _ := newClockedPool(t)
	register(t, p, "a")
	startSolo(p)
	sync1(t, p, "a")
	bad := []api.TaskStatus{
		{JobID: "j1", Attempt: -1, State: api.TaskExited},
		{JobID: "j1", Rank: -1, State: api.TaskExited},
		{JobID: "", State: api.TaskExited},
		{JobID: "j1", State: "dancing"},
		{JobID: "j1", State: api.TaskRunning, PID: -5},
	}
	dup := exited(0, 1) // the same task again, after it was reported running
	_, err := p.Sync(context.Background(), api.AgentReport{NodeID: "a", Tasks: append(append(bad, running(0)), dup)})
	if err != nil {
		t.Fatalf("a sync with malformed task reports: %v; want the rest applied", err)
	}
	if u := rec.next(t); u.Kind != exec.Started || u.PID != 100 {
		t.Fatalf("update %+v; want the good report's start (pid 100)", u)
	}
	select {
	case u := <-rec.ch:
		t.Fatalf("a malformed or repeated report was applied: %+v", u)
	default:
	}
	if w := sync1(t, p, "a", running(0)); len(w.Tasks) != 1 || w.Tasks[0].Stop {
		t.Fatalf("the node lost its task: %+v", w)
	}
}

// The server's clock dates starts and exits; the agent's measures only how
// long ago they were. A start is never in the future nor before the task
// was handed out; an exit never before the start.
func TestAgentTimesAreServerTimes(t *testing.T) {
	ptr := func(t time.Time) *time.Time { return &t }
	const skew = 5 * time.Hour
	cases := map[string]struct {
		agentNow          func(server time.Time) *time.Time
		started, finished func(agentNow time.Time) *time.Time
		// want, as offsets from the server's time at the report (the task
		// was handed out 60s before it)
		wantStart, wantFinish time.Duration
	}{
		"clock five hours ahead": {
			agentNow:  func(s time.Time) *time.Time { return ptr(s.Add(skew)) },
			started:   func(a time.Time) *time.Time { return ptr(a.Add(-30 * time.Second)) },
			finished:  func(a time.Time) *time.Time { return ptr(a.Add(-10 * time.Second)) },
			wantStart: -30 * time.Second, wantFinish: -10 * time.Second,
		},
		"clock five hours behind": {
			agentNow:  func(s time.Time) *time.Time { return ptr(s.Add(-skew)) },
			started:   func(a time.Time) *time.Time { return ptr(a.Add(-30 * time.Second)) },
			finished:  func(a time.Time) *time.Time { return ptr(a.Add(-10 * time.Second)) },
			wantStart: -30 * time.Second, wantFinish: -10 * time.Second,
		},
		"no clock sent: the times the server hears of them": {
			agentNow: func(time.Time) *time.Time { return nil },
			started:  func(time.Time) *time.Time { return ptr(time.Unix(0, 0)) },
			finished: func(time.Time) *time.Time { return ptr(time.Unix(0, 0)) },
		},
		"a start before the task was handed out": {
			agentNow:  func(s time.Time) *time.Time { return ptr(s) },
			started:   func(a time.Time) *time.Time { return ptr(a.Add(-skew)) },
			finished:  func(a time.Time) *time.Time { return ptr(a.Add(-2 * skew)) },
			wantStart: -60 * time.Second, wantFinish: -60 * time.Second,
		},
		"times in the future": {
			agentNow: func(s time.Time) *time.Time { return ptr(s) },
			started:  func(a time.Time) *time.Time { return ptr(a.Add(skew)) },
			finished: func(a time.Time) *time.Time { return ptr(a.Add(skew)) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, rec, _, clk := newClockedPool(t)
			register(t, p, "a")
			startSolo(p)
			handedOut := clk.Now()
			sync1(t, p, "a")
			clk.advance(60 * time.Second)
			server := clk.Now()
			agentNow := tc.agentNow(server)
			ref := server
			if agentNow != nil {
				ref = *agentNow
			}
			ts := exited(0, 0)
			ts.StartedAt, ts.FinishedAt = tc.started(ref), tc.finished(ref)
			if _, err := p.Sync(context.Background(), api.AgentReport{NodeID: "a", Tasks: []api.TaskStatus{ts}, Now: agentNow}); err != nil {
				t.Fatal(err)
			}
			start, exit := rec.next(t), rec.next(t)
			if start.Kind != exec.Started || !start.At.Equal(server.Add(tc.wantStart)) {
				t.Errorf("started at %v; want %v (handed out at %v)", start.At, server.Add(tc.wantStart), handedOut)
			}
			if exit.Kind != exec.Exited || !exit.At.Equal(server.Add(tc.wantFinish)) {
				t.Errorf("exited at %v; want %v", exit.At, server.Add(tc.wantFinish))
			}
		})
	}
}

// RanOn tells whether a node holds (or held, recently) a rank: the agent
// API takes log output only from there.
func TestRanOn(t *testing.T) {
	p, rec, _, _ := startGang(t)
	cases := []struct {
		node          string
		attempt, rank int
		want          bool
	}{
		{"a", 0, 0, true}, {"b", 0, 1, true}, {"a", 0, 1, false}, {"b", 0, 0, false},
		{"c", 0, 0, false}, {"a", 1, 0, false}, {"a", 0, 2, false}, {"a", 0, -1, false},
	}
	check := func(when string) {
		t.Helper()
		for _, c := range cases {
			if got := p.RanOn(c.node, "j1", c.attempt, c.rank); got != c.want {
				t.Errorf("%s: RanOn(%s, j1, %d, %d) = %v; want %v", when, c.node, c.attempt, c.rank, got, c.want)
			}
		}
	}
	check("running")
	sync1(t, p, "a", exited(0, 0))
	sync1(t, p, "b", exited(1, 0))
	if u := rec.next(t); u.Kind != exec.Started {
		t.Fatalf("update %+v", u)
	}
	if u := rec.next(t); u.Kind != exec.Exited {
		t.Fatalf("update %+v", u)
	}
	check("ended")
	for i := range maxEndedRanks {
		p.ended.add("other", i, []string{"z"})
	}
	if p.RanOn("a", "j1", 0, 0) || len(p.ended.node) != maxEndedRanks {
		t.Fatalf("the oldest ended ranks are not forgotten: %d remembered", len(p.ended.node))
	}
}

// An agent's words reach a job's events clipped.
func TestTaskErrorClipped(t *testing.T) {
	p, rec, _, _ := newClockedPool(t)
	register(t, p, "a")
	startSolo(p)
	sync1(t, p, "a")
	bad := exited(0, -1)
	bad.Error, bad.Signal = strings.Repeat("é", 100_000), strings.Repeat("k", 1000)
	sync1(t, p, "a", bad)
	u := rec.next(t)
	if u.Kind != exec.Exited || u.Err == nil || len(u.Err.Error()) > maxTaskError+8 || len(u.Signal) > maxTaskSignal+8 || !utf8.ValidString(u.Err.Error()) {
		t.Fatalf("exit with %d bytes of error, %d of signal; want them clipped", len(u.Err.Error()), len(u.Signal))
	}
}

// An agent that takes over a node once its holder has been silent past
// the TTL is handed none of the holder's tasks: they are lost.
func TestTakeOverAfterTTLGetsNoTasks(t *testing.T) {
	p, rec, _, clk := newClockedPool(t)
	register(t, p, "a")
	sync1(t, p, "a")
	task := soloTask()
	p.Start(context.Background(), task) // placed just as the holder went silent: never delivered
	clk.advance(31 * time.Second)
	if _, err := p.Register(context.Background(), api.AgentRegistration{NodeID: "a", AgentID: "successor-0123456789",
		Tasks: []api.TaskStatus{{JobID: "j1", State: api.TaskRunning, PID: 7}}}, "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	if u := rec.next(t); u.Kind != exec.Exited || u.Lost != api.ReasonLost {
		t.Fatalf("update %+v; want the holder's task lost", u)
	}
	if w := sync1(t, p, "a"); len(w.Tasks) != 0 {
		t.Fatalf("the successor was handed the holder's tasks: %+v", w.Tasks)
	}
}
