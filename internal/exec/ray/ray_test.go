package ray

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/ray/raytest"
)

// book is a NodeBook that remembers what it was told.
type book struct {
	mu    sync.Mutex
	regs  map[string]api.AgentRegistration
	seen  map[string]int
	downs map[string]int
}

func (b *book) RegisterNode(_ context.Context, reg api.AgentRegistration, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.regs[reg.NodeID] = reg
	return nil
}

func (b *book) NodeSeen(id string, _ []api.GPUReading, _ []api.ForeignProcess, _ time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen[id]++
}

func (b *book) NodeDown(id string, _ time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.downs[id]++
}

// harness is an executor on an emulated cluster, polled by hand.
type harness struct {
	t       *testing.T
	c       *raytest.Cluster
	e       *Executor
	b       *book
	now     time.Time
	mu      sync.Mutex
	updates []exec.Update
}

func newHarness(t *testing.T, opts raytest.Options, cfg Config) *harness {
	t.Helper()
	c := raytest.New(opts)
	t.Cleanup(c.Close)
	h := &harness{t: t, c: c, b: &book{regs: map[string]api.AgentRegistration{}, seen: map[string]int{}, downs: map[string]int{}},
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Address, cfg.Book = c.URL, h.b
	cfg.Sink = func(u exec.Update) { h.mu.Lock(); h.updates = append(h.updates, u); h.mu.Unlock() }
	cfg.Now = h.clock
	if cfg.StopWait == 0 {
		cfg.StopWait = time.Second
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// until polls the executor until cond holds, failing after 10s.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; updates: %+v", what, h.got())
		}
		h.e.Poll(context.Background())
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) got() []exec.Update {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]exec.Update(nil), h.updates...)
}

// exited returns the attempt's Exited update, if any.
func (h *harness) exited(job string) (exec.Update, bool) {
	for _, u := range h.got() {
		if u.JobID == job && u.Kind == exec.Exited {
			return u, true
		}
	}
	return exec.Update{}, false
}

func (h *harness) waitExit(job string) exec.Update {
	h.t.Helper()
	var u exec.Update
	h.until("job "+job+" to exit", func() (ok bool) { u, ok = h.exited(job); return ok })
	return u
}

func (h *harness) task(job, cmd string, gpus int) exec.Task {
	h.t.Helper()
	h.until("the Ray nodes", func() bool { return len(h.e.Health()) == 1 && h.e.Health()[0].Nodes > 0 })
	g := make([]int, gpus)
	for i := range g {
		g[i] = i
	}
	return exec.Task{JobID: job, Command: cmd, Env: map[string]string{"MINE": "yes"}, NodeID: "ray-10.0.0.1",
		Ranks: []exec.Rank{{NodeID: "ray-10.0.0.1", GPUs: g}}, GPUs: g,
		LogPath: filepath.Join(h.t.TempDir(), job+".log")}
}

func TestNodesRegisteredWithPoolAndGPUs(t *testing.T) {
	h := newHarness(t, raytest.Options{Nodes: []raytest.Node{
		{IP: "10.0.0.1", GPUs: 4, Model: "A100", Head: true}, {IP: "10.0.0.2"}, {IP: "10.0.0.3", GPUs: 8, Dead: true}}}, Config{})
	h.e.Poll(context.Background())
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if len(h.b.regs) != 2 {
		t.Fatalf("registered %v, want the two alive nodes", h.b.regs)
	}
	r := h.b.regs["ray-10.0.0.1"]
	if len(r.GPUs) != 4 || r.GPUs[3].Model != "A100" || r.Labels["pool"] != "ray" || r.Labels["ray_node_id"] == "" || r.Address != "10.0.0.1" {
		t.Fatalf("head registration %+v", r)
	}
	if g := h.b.regs["ray-10.0.0.2"].GPUs; len(g) != 0 {
		t.Fatalf("CPU node registered GPUs %v", g)
	}
	if h.b.seen["ray-10.0.0.1"] != 1 || h.b.seen["ray-10.0.0.3"] != 0 {
		t.Fatalf("seen %v", h.b.seen)
	}
}

func TestSubmitRunsPinnedWithEnvAndLogs(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{StopWait: 7 * time.Second})
	tk := h.task("j1", `echo "hello $MINE $CORRAL_JOB_ID gpus=$CUDA_VISIBLE_DEVICES"; echo oops >&2`, 2)
	tk.Workdir = t.TempDir()
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	u := h.waitExit("j1")
	if u.ExitCode != 0 || u.Err != nil || u.Lost != "" {
		t.Fatalf("exit %+v", u)
	}
	if ups := h.got(); ups[0].Kind != exec.Started || ups[0].PID == 0 {
		t.Fatalf("first update %+v, want Started with the driver's pid", ups[0])
	}
	j, ok := h.c.Job(SubmissionID("j1", 0))
	if !ok {
		t.Fatal("the head does not know the submission")
	}
	if j.EntrypointResources["node:10.0.0.1"] != 0.001 || j.EntrypointNumGPUs == nil || *j.EntrypointNumGPUs != 2 {
		t.Fatalf("submission resources %v gpus %v", j.EntrypointResources, j.EntrypointNumGPUs)
	}
	if j.EnvVars["RAY_JOB_STOP_WAIT_TIME_S"] != "7" || j.EnvVars["CORRAL_ATTEMPT"] != "0" || j.EnvVars["MINE"] != "yes" {
		t.Fatalf("env_vars %v", j.EnvVars)
	}
	b, err := os.ReadFile(tk.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, "hello yes j1 gpus=0,1") || !strings.Contains(got, "oops") {
		t.Fatalf("log %q", got)
	}
}

func TestResubmitIsIdempotent(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{})
	tk := h.task("j2", "sleep 0.2", 1)
	// The head took an earlier submit of this attempt whose answer was
	// lost: the executor's own submit is answered "already exists".
	h.e.mu.Lock()
	n := h.e.nodes["ray-10.0.0.1"]
	h.e.mu.Unlock()
	req := h.e.request(tk, 0, tk.Ranks[0], n.NodeIP, n.NodeIP, 1)
	if err := h.e.c.submit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := h.e.c.submit(context.Background(), req); err != nil {
		t.Fatalf("a second submit of the same attempt: %v", err)
	}
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatalf("start of an attempt the head has: %v", err)
	}
	if u := h.waitExit("j2"); u.ExitCode != 0 || u.Err != nil {
		t.Fatalf("exit %+v", u)
	}
	if n := len(h.c.Submissions()); n != 1 || h.c.Requests("POST /api/jobs/") < 3 {
		t.Fatalf("%d submissions after %d submit requests, want 1 after at least 3", n, h.c.Requests("POST /api/jobs/"))
	}
}

func TestExitStatusMapping(t *testing.T) {
	h := newHarness(t, raytest.Options{Nodes: []raytest.Node{{IP: "10.0.0.1", GPUs: 8}}}, Config{})
	cases := []struct {
		job, cmd string
		code     int
		signal   string
	}{
		{"ok", "true", 0, ""},
		{"fail3", "exit 3", 3, ""},
		{"killed", "kill -KILL $$", 137, "killed"},
	}
	for _, c := range cases {
		if err := h.e.Start(context.Background(), h.task(c.job, c.cmd, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		u := h.waitExit(c.job)
		if u.ExitCode != c.code || u.Signal != c.signal || u.Err != nil {
			t.Errorf("%s: exit %d signal %q err %v, want %d %q", c.job, u.ExitCode, u.Signal, u.Err, c.code, c.signal)
		}
	}
	// Ray's answers that no process gives here.
	code := func(n int) *int { return &n }
	for _, c := range []struct {
		d        JobDetails
		code     int
		signal   string
		wantsErr bool
	}{
		{JobDetails{Status: StatusStopped}, 143, "terminated", false},
		{JobDetails{Status: StatusStopped, DriverExitCode: code(-9)}, 137, "killed", false},
		{JobDetails{Status: StatusFailed, Message: "runtime env setup failed"}, -1, "", true},
		{JobDetails{Status: StatusFailed, DriverExitCode: code(2)}, 2, "", false},
	} {
		u := exitOf(c.d)
		if u.ExitCode != c.code || u.Signal != c.signal || (u.Err != nil) != c.wantsErr {
			t.Errorf("%+v: %+v", c.d, u)
		}
	}
}

func TestStopTermThenKillAfterStopWait(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{StopWait: time.Second})
	// One obeys SIGTERM, one ignores it and is killed after the wait.
	polite, stubborn := h.task("polite", "trap 'echo got-term; exit 0' TERM; echo ready; sleep 30 & wait", 1), h.task("stubborn", "trap '' TERM; echo ready; sleep 30", 1)
	for _, tk := range []exec.Task{polite, stubborn} {
		if err := h.e.Start(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	h.until("both ready (their traps set)", func() bool {
		a, _ := os.ReadFile(polite.LogPath)
		b, _ := os.ReadFile(stubborn.LogPath)
		return strings.Contains(string(a), "ready") && strings.Contains(string(b), "ready")
	})
	for _, j := range []string{"polite", "stubborn"} {
		if err := h.e.Stop(context.Background(), j, 0, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if u := h.waitExit("polite"); u.ExitCode != 0 {
		t.Fatalf("polite: %+v", u)
	}
	if u := h.waitExit("stubborn"); u.ExitCode != 137 || u.Signal != "killed" {
		t.Fatalf("stubborn: %+v, want killed after the stop wait", u)
	}
	// Stopping what is gone is no error.
	if err := h.e.Stop(context.Background(), "polite", 0, 0); err != nil {
		t.Fatal(err)
	}
}

func TestTokenAuth(t *testing.T) {
	wrong := newHarness(t, raytest.Options{Token: "s3cret"}, Config{Token: "nope"})
	wrong.e.Poll(context.Background())
	if h := wrong.e.Health()[0]; h.Nodes != 0 || !strings.Contains(h.LastError, "403") {
		t.Fatalf("with a wrong token: %+v", h)
	}
	none := newHarness(t, raytest.Options{Token: "s3cret"}, Config{})
	none.e.Poll(context.Background())
	if h := none.e.Health()[0]; !strings.Contains(h.LastError, "401") {
		t.Fatalf("without a token: %+v", h)
	}
	right := newHarness(t, raytest.Options{Token: "s3cret"}, Config{Token: "s3cret"})
	if err := right.e.Start(context.Background(), right.task("tok", "true", 0)); err != nil {
		t.Fatal(err)
	}
	if u := right.waitExit("tok"); u.ExitCode != 0 {
		t.Fatalf("%+v", u)
	}
}

func TestHeadRestartMakesAttemptLost(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{})
	if err := h.e.Start(context.Background(), h.task("long", "sleep 30", 1)); err != nil {
		t.Fatal(err)
	}
	h.until("running", func() bool { return len(h.got()) > 0 })
	h.c.Restart()
	u := h.waitExit("long")
	if u.Lost != api.ReasonLost || u.Err == nil {
		t.Fatalf("after a head restart: %+v, want lost", u)
	}
}

func TestAdoptFollowsOrLoses(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{})
	tk := h.task("adopted", "sleep 0.3; echo done", 1)
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	// Start hands the submission to a goroutine: the server that dies is
	// one whose submission Ray has.
	h.until("submitted", func() bool { return len(h.c.Submissions()) > 0 })
	// A new executor (the server restarted) adopts the running attempt and
	// one Ray never had.
	h2 := newHarness(t, raytest.Options{}, Config{})
	h2.c.Close()
	h2.e.c.base = h.c.URL
	h2.e.Adopt(context.Background(), tk)
	h2.e.Adopt(context.Background(), h.task("never", "true", 0))
	if u := h2.waitExit("adopted"); u.ExitCode != 0 {
		t.Fatalf("adopted: %+v", u)
	}
	if u := h2.waitExit("never"); u.Lost != api.ReasonLost {
		t.Fatalf("never submitted: %+v, want lost", u)
	}
}

func TestBreakerOpensMarksNodesDownAndReconnects(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{Breaker: breaker.Config{Threshold: 2, Reset: 5 * time.Second, MaxReset: 20 * time.Second}})
	h.e.Poll(context.Background())
	h.c.SetUnreachable(true)
	h.e.Poll(context.Background())
	if s := h.e.Health()[0].Breaker; s != "closed" {
		t.Fatalf("after one failure: %s", s)
	}
	h.e.Poll(context.Background())
	hl := h.e.Health()[0]
	if hl.Breaker != "open" || hl.RetryAt == nil || hl.LastError == "" {
		t.Fatalf("after two failures: %+v", hl)
	}
	h.e.Poll(context.Background()) // the open breaker sends the nodes down once
	h.e.Poll(context.Background())
	if d := h.b.downs["ray-10.0.0.1"]; d != 1 {
		t.Fatalf("node marked down %d times, want once", d)
	}
	// A job started while the head is away waits for it.
	tk := exec.Task{JobID: "waits", Command: "echo late", NodeID: "ray-10.0.0.1", Ranks: []exec.Rank{{NodeID: "ray-10.0.0.1"}}, LogPath: filepath.Join(t.TempDir(), "w.log")}
	h.e.mu.Lock()
	h.e.nodes["ray-10.0.0.1"] = NodeState{NodeIP: "10.0.0.1"} // placed just before the breaker opened
	h.e.mu.Unlock()
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatalf("start while unreachable: %v", err)
	}
	// The probe after the reset fails: the breaker backs off to 10s.
	h.advance(5 * time.Second)
	h.e.Poll(context.Background())
	if hl := h.e.Health()[0]; hl.Breaker != "open" || hl.RetryAt.Sub(h.clock()) != 10*time.Second {
		t.Fatalf("after a failed probe: %+v", hl)
	}
	h.c.SetUnreachable(false)
	h.e.Poll(context.Background())
	if s := h.e.Health()[0].Breaker; s != "open" {
		t.Fatalf("probed before the backoff ended: %s", s)
	}
	h.advance(10 * time.Second)
	if u := h.waitExit("waits"); u.ExitCode != 0 {
		t.Fatalf("%+v", u)
	}
	if hl := h.e.Health()[0]; hl.Breaker != "closed" || hl.Nodes != 1 {
		t.Fatalf("after reconnection: %+v", hl)
	}
	if _, ok := h.c.Job(SubmissionID("waits", 0)); !ok {
		t.Fatal("the waiting job was never submitted")
	}
}

func TestStartRefusesUnknownNodes(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{})
	tk := h.task("nowhere", "true", 1)
	tk.NodeID, tk.Ranks[0].NodeID = "ray-10.9.9.9", "ray-10.9.9.9"
	if err := h.e.Start(context.Background(), tk); err == nil {
		t.Fatal("a node Ray does not have was accepted")
	}
	// A submission Ray refuses (an empty entrypoint) ends the attempt
	// with the refusal.
	if err := h.e.Start(context.Background(), h.task("empty", "", 0)); err != nil {
		t.Fatal(err)
	}
	if u := h.waitExit("empty"); u.Err == nil || u.Lost != "" || !strings.Contains(u.Err.Error(), "entrypoint") {
		t.Fatalf("a refused submission: %+v", u)
	}
	// The client tells a refusal (a negative GPU count here) from an
	// unreachable head.
	bad := h.task("bad", "true", 1)
	req := h.e.request(bad, 0, bad.Ranks[0], "10.0.0.1", "10.0.0.1", 1)
	neg := -1.0
	req.EntrypointNumGPUs = &neg
	var he *HTTPError
	if err := h.e.c.submit(context.Background(), req); !errors.As(err, &he) || he.Status != 400 || Unreachable(err) {
		t.Fatalf("want a 400 that is no unreachability, got %v", err)
	}
}

// gang is a task of one rank per node, one GPU each.
func gang(h *harness, job, cmd string, nodes ...string) exec.Task {
	tk := h.task(job, cmd, 1)
	tk.Ranks = nil
	for _, n := range nodes {
		tk.Ranks = append(tk.Ranks, exec.Rank{NodeID: n, GPUs: []int{0}})
	}
	tk.NodeID, tk.GPUs = nodes[0], []int{0}
	return tk
}

func TestGangIsOneRayJobPerRank(t *testing.T) {
	h := newHarness(t, raytest.Options{Nodes: []raytest.Node{{IP: "10.0.0.1", GPUs: 2, Head: true}, {IP: "10.0.0.2", GPUs: 2}}}, Config{})
	tk := gang(h, "g", `echo "rank=$CORRAL_NODE_RANK of $CORRAL_NUM_NODES master=$CORRAL_MASTER_ADDR:$CORRAL_MASTER_PORT node=$CORRAL_NODE_ID"`, "ray-10.0.0.1", "ray-10.0.0.2")
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	if u := h.waitExit("g"); u.ExitCode != 0 || u.Err != nil {
		t.Fatalf("gang exit %+v", u)
	}
	r1, ok := h.c.Job(RankSubmissionID("g", 0, 1))
	if !ok || r1.EntrypointResources["node:10.0.0.2"] != 0.001 || r1.EnvVars["CORRAL_NODE_RANK"] != "1" {
		t.Fatalf("rank 1's Ray job %+v", r1)
	}
	for rank, want := range []string{"rank=0 of 2 master=10.0.0.1:", "rank=1 of 2 master=10.0.0.1:"} {
		b, _ := os.ReadFile(rankLogPath(tk.LogPath, rank))
		if !strings.Contains(string(b), want) || !strings.Contains(string(b), "node=ray-10.0.0."+string(rune('1'+rank))) {
			t.Errorf("rank %d's log %q, want %q", rank, b, want)
		}
	}
	// A rank that fails stops the others; the attempt ends with its code.
	tk = gang(h, "gf", `if [ "$CORRAL_NODE_RANK" = 1 ]; then exit 4; fi; sleep 30`, "ray-10.0.0.1", "ray-10.0.0.2")
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	if u := h.waitExit("gf"); u.ExitCode != 4 {
		t.Fatalf("gang with a failing rank: %+v", u)
	}
	if r0, _ := h.c.Job(RankSubmissionID("gf", 0, 0)); r0.Status != StatusStopped {
		t.Fatalf("rank 0 after rank 1 failed: %s, want STOPPED", r0.Status)
	}
}

func TestLogCappedAtMaxLogSize(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{MaxLogSize: 10})
	tk := h.task("chatty", "echo 0123456789abcdef; sleep 0.2; echo more", 0)
	if err := h.e.Start(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	h.waitExit("chatty")
	b, err := os.ReadFile(tk.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.HasPrefix(got, "0123456789\ncorral: the stored log reached its limit of 10 bytes") || strings.Contains(got, "more") {
		t.Fatalf("capped log %q", got)
	}
}

// A job with a container image is refused before anything reaches the
// cluster: the Ray executor does not run images.
func TestStartRefusesImage(t *testing.T) {
	h := newHarness(t, raytest.Options{}, Config{})
	err := h.e.Start(context.Background(), exec.Task{JobID: "j1", Command: "true", NodeID: "ray-10.0.0.1", Image: "localhost/corral-test:1"})
	if err == nil || !strings.Contains(err.Error(), "does not run container images") {
		t.Fatalf("Start: %v, want a refusal naming images", err)
	}
}
