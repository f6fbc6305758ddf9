package orchestrator_test

// The golden day: a scripted day on a two-node cluster, driven through the
// orchestrator's exported API only, under a fake clock, injected ids and a
// loop stepped one event at a time. Every batch the loop commits and every
// call it makes to the executor is written down as text and compared with
// testdata/golden/day.txt. The file is the behaviour the orchestrator must
// keep while its package is taken apart (docs/architecture.md says when an
// update of it is legitimate). go test ./internal/orchestrator -run
// TestGoldenDay -update rewrites it.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/day.txt from this run")

const goldenPath = "testdata/golden/day.txt"

// The day starts on a Monday morning; the loop's tick is the default 5s
// and nodes are lost after 30s of silence.
var dayStart = time.Date(2025, 3, 3, 8, 0, 0, 0, time.UTC)

const (
	tick    = 5 * time.Second
	nodeTTL = 30 * time.Second
)

func TestGoldenDay(t *testing.T) {
	d := newDay(t)
	d.play()
	got := d.rec.text()
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("the day differs from %s (-want +got):\n%s\nRun with -update only if the change is meant (docs/architecture.md).",
			goldenPath, lineDiff(string(want), got))
	}
}

// play is the day's script. Each step is one event for the loop (an API
// call, an executor report, a node's news, a tick), and the next step
// begins once the loop has done all it can about it (settle).
func (d *day) play() {
	ctx := context.Background()
	d.start()

	d.step("prices and a budget: H100 at $2/GPU-hour; carol may spend $4 this month, then her work is held")
	d.must(d.o.FeatureOps().Spend.SetPrice(ctx, "H100", 2))
	d.settle()
	d.must(d.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: usage.BudgetUser, Name: "carol", Dollars: 4, Action: usage.ActionHold}))
	d.settle()

	d.step("two agents register their nodes, 4 simulated H100 each")
	d.register("n1")
	d.register("n2")

	d.step("alice submits a 2-GPU training job at high priority")
	d.submit(api.SubmitRequest{Name: "train", User: "alice", Project: "vision", Command: "python train.py",
		GPUCount: ptr(2), Priority: raw(`"high"`), EstimatedDuration: raw(`"3h"`), MaxRetries: 2})
	d.startAll()

	d.step("bob submits an array of 5 one-GPU tasks, at most 2 at once (%2)")
	arr := d.submit(api.SubmitRequest{Name: "sweep", User: "bob", Project: "nlp", Command: "python sweep.py",
		GPUCount: ptr(1), Array: "0-4%2", EstimatedDuration: raw(`"30m"`), MaxRetries: 1})
	d.startAll()
	d.view(arr + "_2")

	d.step("bob submits a pipeline prep -> fit -> eval, each afterok the one before")
	prep := d.submit(api.SubmitRequest{Name: "prep", User: "bob", Project: "nlp", Command: "python prep.py",
		GPUCount: ptr(1), EstimatedDuration: raw(`"20m"`)})
	fit := d.submit(api.SubmitRequest{Name: "fit", User: "bob", Project: "nlp", Command: "python fit.py",
		GPUCount: ptr(1), EstimatedDuration: raw(`"40m"`), DependsOn: "afterok:" + prep})
	eval := d.submit(api.SubmitRequest{Name: "eval", User: "bob", Project: "nlp", Command: "python eval.py",
		GPUCount: ptr(1), EstimatedDuration: raw(`"1h"`), DependsOn: "afterok:" + fit, MaxRetries: 1})
	d.startAll()
	d.view(fit, eval)

	d.step("carol submits a 2-GPU job; her budget counts it while it runs")
	rl := d.submit(api.SubmitRequest{Name: "rl", User: "carol", Project: "rl", Command: "python rl.py",
		GPUCount: ptr(2), EstimatedDuration: raw(`"1h"`), Priority: raw(`"low"`)})
	d.startAll()

	d.step("erin holds the last free GPU for an hour (gpu-allocate)")
	hold, err := d.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "erin-debug", GPUCount: 1, Duration: raw(`"1h"`)}, "erin")
	if err != nil {
		d.t.Fatalf("hold: %v", err)
	}
	d.settle()

	d.step("an admin books 4 GPUs for dave from 10:00 to 11:00")
	d.must(d.o.FeatureOps().Bookings.Create(ctx, api.ReservationRequest{Name: "dave-demo", GPUs: ptr(4),
		Start: ptr(dayStart.Add(2 * time.Hour).Format(time.RFC3339)), End: ptr(dayStart.Add(3 * time.Hour).Format(time.RFC3339)),
		Users: &[]string{"dave"}}, bookings.Booker{User: "admin", Admin: true}))
	d.settle()

	d.advance(20*time.Minute, "n1", "n2")
	d.step("prep ends well: fit may start")
	d.report(prep, 0, exec.Exited, 0)
	d.startAll()
	d.view(eval)

	d.advance(10*time.Minute, "n1", "n2")
	d.step("the first two tasks of the array end (one fails); the throttle lets two more go")
	d.report(arr+"_0", 0, exec.Exited, 0)
	d.startAll()
	d.report(arr+"_1", 0, exec.Exited, 1)
	d.startAll()
	d.view(arr + "_4")

	d.step("erin releases her hold")
	d.must(d.o.FeatureOps().Holds.Release(ctx, hold.JobID))
	d.settle()

	d.step("erin asks for 1 GPU for 2h: the free GPU is booked from 10:00, so it waits; 1 GPU for 1h fits before")
	analysis := d.submit(api.SubmitRequest{Name: "analysis", User: "erin", Project: "vision", Command: "python analysis.py",
		GPUCount: ptr(1), EstimatedDuration: raw(`"2h"`)})
	d.view(analysis)
	quick := d.submit(api.SubmitRequest{Name: "quick", User: "erin", Project: "vision", Command: "python quick.py",
		GPUCount: ptr(1), EstimatedDuration: raw(`"1h"`)})
	d.startAll()
	d.view(quick)

	d.advance(30*time.Minute, "n1", "n2")
	d.step("carol's job ends after an hour: $4 spent, her budget is exhausted")
	d.report(rl, 0, exec.Exited, 0)
	d.startAll()
	d.step("carol submits again: held by her budget")
	rl2 := d.submit(api.SubmitRequest{Name: "rl-2", User: "carol", Project: "rl", Command: "python rl.py",
		GPUCount: ptr(1), EstimatedDuration: raw(`"1h"`)})
	d.view(rl2)
	d.budgets()

	d.step("fit ends well: eval may start")
	d.report(fit, 0, exec.Exited, 0)
	d.startAll()
	d.view(eval)

	d.step("the admin turns on priority scheduling with preemption")
	d.must(d.o.SetPolicies(ctx, api.PoliciesUpdate{Policy: ptr("priority"), Preemption: ptr(true)}))
	d.settle()

	d.advance(5*time.Minute, "n1", "n2")
	d.step("alice submits a critical 4-GPU job on a full cluster: lower work is preempted")
	urgent := d.submit(api.SubmitRequest{Name: "urgent", User: "alice", Project: "vision", Command: "python urgent.py",
		GPUCount: ptr(4), Priority: raw(`"critical"`), EstimatedDuration: raw(`"20m"`)})
	d.view(urgent)
	for _, id := range d.stopped() {
		d.report(id, -1, exec.Exited, 143)
		d.startAll()
	}
	d.view(urgent)

	d.advance(20*time.Minute, "n1", "n2")
	d.step("urgent ends; the preempted work goes back")
	d.report(urgent, 0, exec.Exited, 0)
	d.startAll()

	d.advance(20*time.Minute, "n1", "n2")
	d.step("dave submits into his booking before it begins")
	demo := d.submit(api.SubmitRequest{Name: "demo", User: "dave", Project: "demo", Command: "python demo.py",
		GPUCount: ptr(2), EstimatedDuration: raw(`"30m"`), Reservation: "dave-demo"})
	d.view(demo)

	d.step("n2 stops reporting: past the node TTL it is down, its jobs are requeued or fail")
	d.advance(20*time.Second, "n1")
	d.advance(15*time.Second, "n1")
	d.startAll()

	d.step("n2's agent comes back and registers again")
	d.register("n2")
	d.startAll()

	d.advance(15*time.Minute, "n1", "n2") // 10:00:35, dave's booking has begun
	d.step("the booking's job and the requeued work start; one start is not yet confirmed")
	pending := d.started()
	for _, id := range pending[:len(pending)-1] {
		d.report(id, -1, exec.Started, 0)
	}
	unconfirmed := pending[len(pending)-1]

	d.step("the server restarts: the running jobs are adopted")
	d.restart()
	d.step("the unconfirmed start never ran: requeued without counting a retry")
	d.lost(unconfirmed)
	d.startAll()

	d.advance(25*time.Minute, "n1", "n2")
	d.step("after the restart, the adopted jobs go on ending")
	for _, id := range d.running() {
		d.report(id, -1, exec.Exited, 0)
		d.startAll()
	}
	d.step("carol's second job is canceled while her budget holds it")
	d.must2(d.o.Cancel(ctx, rl2, 0))
	d.settle()

	d.advance(40*time.Minute, "n1", "n2") // 11:05: the booking has ended
	d.step("the end of the day: everything left ends")
	for range 4 {
		for _, id := range d.running() {
			d.report(id, -1, exec.Exited, 0)
			d.startAll()
		}
	}
	d.step("the day's jobs")
	d.view(d.jobs...)
	d.budgets()
	d.stop()
}

// day is the script's world: the fake clock, the ids, the store, the
// recording executor and the orchestrator, restarted in place.
type day struct {
	t     *testing.T
	dir   string // the store and DataDir live here
	rec   *recorder
	ex    *recExec
	now   atomic.Int64 // Config.Now, unix nanoseconds
	clock atomic.Int64 // Config.Clock: moves one tick per tick, so the loop never sees a stall
	ids   atomic.Int64
	o     *orchestrator.Orchestrator
	ticks chan time.Time
	idle  chan struct{}
	stopR func()
	jobs  []string // every job submitted, array tasks one by one, in order
}

func newDay(t *testing.T) *day {
	d := &day{t: t, dir: t.TempDir()}
	d.now.Store(dayStart.UnixNano())
	d.clock.Store(dayStart.UnixNano())
	d.rec = &recorder{start: dayStart, dataDir: d.dir}
	d.ex = &recExec{rec: d.rec}
	t.Cleanup(func() {
		if d.stopR != nil {
			d.stopR()
		}
	})
	return d
}

func (d *day) nowT() time.Time { return time.Unix(0, d.now.Load()).UTC() }

// start opens the store and runs an orchestrator on it (New recovers
// what the store holds), then waits for its first cycle.
func (d *day) start() {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(d.dir, "corral.db"))
	if err != nil {
		d.t.Fatal(err)
	}
	d.ticks = make(chan time.Time)
	d.idle = make(chan struct{}, 16)
	cfg := orchestrator.Config{
		Store: st, Log: recLog{st, d.rec}, Executor: d.ex, DataDir: d.dir,
		Tick: tick, NodeTTL: nodeTTL,
		Now:    d.nowT,
		Clock:  func() time.Time { return time.Unix(0, d.clock.Load()) },
		Logger: slog.New(slog.DiscardHandler),
		Notify: recNotifier{},
		NewID:  func(time.Time) string { return fmt.Sprintf("j%04d", d.ids.Add(1)) },
		Ticks:  d.ticks,
		Idle: func() {
			select {
			case d.idle <- struct{}{}:
			default: // settle fails the step
			}
		},
	}
	o, err := orchestrator.New(ctx, cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	d.o = o
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	d.stopR = func() { cancel(); <-done; st.Close(); d.stopR = nil }
	d.settle()
}

// stop ends the loop and closes the store, as a server that exits.
func (d *day) stop() {
	if d.stopR != nil {
		d.stopR()
	}
}

// restart stops the server and starts a new one on the same store.
func (d *day) restart() {
	d.stop()
	d.rec.line("-- restart: New on the same store")
	d.start()
}

// settle waits until the loop has done all it can about the last event
// and waits for the next: every batch and executor call of the step is
// then recorded.
func (d *day) settle() {
	d.t.Helper()
	select {
	case <-d.idle:
	case <-time.After(30 * time.Second):
		d.t.Fatal("the loop did not settle (the step reached no loop, or the loop is stuck)")
	}
	if n := len(d.idle); n > 0 {
		d.t.Fatalf("the loop went idle %d more times in one step: a step must be one event", n)
	}
}

func (d *day) step(title string) {
	d.rec.line(fmt.Sprintf("\n== %s %s", d.rec.rel(d.nowT()), title))
}

// must2 is must for calls of three results.
func (d *day) must2(_, _ any, err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatal(err)
	}
}

// must fails the test on an API error; the value is discarded (the
// batches and calls it made are what is recorded).
func (d *day) must(_ any, err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatal(err)
	}
}

func (d *day) register(node string) {
	d.t.Helper()
	reg := api.AgentRegistration{NodeID: node, AgentID: "agent-of-" + node + "-0001", Hostname: node + ".lab", Simulated: true,
		Address: node + ".lab:7070"}
	for i := range 4 {
		reg.GPUs = append(reg.GPUs, api.AgentGPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", node, i), Model: "H100",
			MemoryMiB: 80 * 1024, Simulated: true})
	}
	d.rec.line("   > register " + node)
	if err := d.o.RegisterNode(context.Background(), reg, node+".lab"); err != nil {
		d.t.Fatalf("register %s: %v", node, err)
	}
	d.settle()
}

func (d *day) submit(req api.SubmitRequest) string {
	d.t.Helper()
	d.rec.line(fmt.Sprintf("   > submit %s (%s)", req.Name, req.User))
	j, _, err := d.o.Submit(context.Background(), req, "")
	if err != nil {
		d.t.Fatalf("submit %s: %v", req.Name, err)
	}
	d.settle()
	if j.ArrayJobID == "" {
		d.jobs = append(d.jobs, j.ID)
		return j.ID
	}
	a, err := d.o.FeatureOps().Arrays.Get(j.ArrayJobID) // its tasks are ID_0, ID_1, ...
	if err != nil {
		d.t.Fatalf("array %s: %v", j.ArrayJobID, err)
	}
	for _, i := range a.Tasks {
		d.jobs = append(d.jobs, fmt.Sprintf("%s_%d", a.ID, i))
	}
	return a.ID
}

// lost feeds the executor's report that the job's current attempt never
// ran (its node came back without it).
func (d *day) lost(id string) {
	d.t.Helper()
	j, err := d.o.Job(id)
	if err != nil {
		d.t.Fatalf("lost %s: %v", id, err)
	}
	d.rec.line(fmt.Sprintf("   > report %s attempt %d lost, never started", id, j.RetryCount))
	d.ex.forget(id)
	d.o.Sink(exec.Update{JobID: id, Attempt: j.RetryCount, Kind: exec.Exited, At: d.nowT(), ExitCode: -1,
		Lost: "lost", Unstarted: true, Err: errors.New("its node came back without it")})
	d.settle()
}

// report feeds the executor's report on the job's attempt (-1: its current
// one) through Sink, at the fake now.
func (d *day) report(id string, attempt int, kind exec.UpdateKind, code int) {
	d.t.Helper()
	if attempt < 0 {
		j, err := d.o.Job(id)
		if err != nil {
			d.t.Fatalf("report %s: %v", id, err)
		}
		attempt = j.RetryCount
	}
	u := exec.Update{JobID: id, Attempt: attempt, Kind: kind, At: d.nowT()}
	desc := kind.String()
	if kind == exec.Started {
		u.PID = 1000 + int(d.ids.Load())
	} else {
		u.ExitCode = code
		if code == 143 {
			u.Signal = "terminated"
		}
		desc = fmt.Sprintf("exited %d", code)
	}
	d.rec.line(fmt.Sprintf("   > report %s attempt %d %s", id, attempt, desc))
	d.ex.forget(id)
	d.o.Sink(u)
	d.settle()
}

// advance moves the fake clock on by dt; the nodes named report (each a
// step), then the loop ticks.
func (d *day) advance(dt time.Duration, live ...string) {
	d.t.Helper()
	d.now.Add(int64(dt))
	now := d.nowT()
	d.rec.line(fmt.Sprintf("\n== %s tick (+%s; reporting: %s)", d.rec.rel(now), dt, strings.Join(live, ",")))
	for _, n := range live {
		d.o.NodeSeen(n, nil, nil, now)
		d.settle()
	}
	d.clock.Add(int64(tick))
	select {
	case d.ticks <- now:
	case <-time.After(30 * time.Second):
		d.t.Fatal("the loop did not take the tick")
	}
	d.settle()
}

// startAll reports every job the executor was asked to start, and the
// script has not reported on, as running.
func (d *day) startAll() {
	for _, id := range d.started() {
		d.report(id, -1, exec.Started, 0)
	}
}

// started returns the jobs the executor was asked to start (or adopt)
// and that the script has not reported on since, in id order.
func (d *day) started() []string { return d.ex.take(&d.ex.starts) }

// stopped returns the jobs the executor was asked to stop since.
func (d *day) stopped() []string { return d.ex.take(&d.ex.stops) }

// running returns the jobs that run now, by the orchestrator's view.
func (d *day) running() []string {
	var out []string
	for _, j := range d.o.ActiveJobs() {
		if j.State == api.StateRunning {
			out = append(out, j.ID)
		}
	}
	slices.Sort(out)
	return out
}

// view writes down what the API shows of the jobs: state, reason, and
// why a queued job waits (its pending_cause, in brackets, where it is not
// its pending_reason).
func (d *day) view(ids ...string) {
	d.t.Helper()
	for _, id := range ids {
		j, err := d.o.Job(id)
		if err != nil {
			d.t.Fatalf("view %s: %v", id, err)
		}
		s := fmt.Sprintf("   ? %s %s %s (%s)", j.ID, j.Name, j.State, j.Reason)
		if j.PendingReason != "" {
			s += " pending " + j.PendingReason
			if j.PendingCause != j.PendingReason {
				s += " (" + j.PendingCause + ")"
			}
			s += ": " + j.PendingMessage
		}
		d.rec.line(d.rec.clean(s))
	}
}

func (d *day) budgets() {
	for _, b := range d.o.FeatureOps().Spend.Budgets() {
		d.rec.line(fmt.Sprintf("   ? budget %s: $%.2f of $%.2f, exhausted %v, action %s", b.Key(), b.UsedDollars, b.Dollars, b.Exhausted, b.EffectiveAction))
	}
}

// recorder keeps the day's text: step headers, batches, executor calls.
// The loop and the script write to it; a run of executor calls between
// two batches is sorted, as their order within one after-commit is not
// behaviour (some come from map walks).
type recorder struct {
	start   time.Time
	dataDir string
	mu      sync.Mutex
	lines   []string
	calls   []string // executor calls since the last batch or line
}

func (r *recorder) flush() {
	slices.Sort(r.calls)
	r.lines = append(r.lines, r.calls...)
	r.calls = nil
}

func (r *recorder) line(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flush()
	r.lines = append(r.lines, s)
}

func (r *recorder) call(format string, args ...any) {
	s := r.clean("   exec " + fmt.Sprintf(format, args...))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flush()
	return strings.TrimPrefix(strings.Join(r.lines, "\n"), "\n") + "\n"
}

// rel writes t as an offset from the day's start.
func (r *recorder) rel(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	d := t.Sub(r.start)
	if d < 0 {
		return "T-" + (-d).String()
	}
	return "T+" + d.String()
}

var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// clean makes text deterministic: timestamps become offsets from the
// day's start, the temporary directory becomes $DATA.
func (r *recorder) clean(s string) string {
	s = strings.ReplaceAll(s, r.dataDir, "$DATA")
	return timestamp.ReplaceAllStringFunc(s, func(m string) string {
		t, err := time.Parse(time.RFC3339Nano, m)
		if err != nil {
			return m
		}
		return r.rel(t)
	})
}

// batch writes a committed batch, one line per row, rows of a part in a
// stable order (the events of one job keep theirs).
func (r *recorder) batch(b *store.Batch) {
	var out []string
	add := func(part string, rows []string, sorted bool) {
		if sorted {
			slices.Sort(rows)
		}
		for _, s := range rows {
			out = append(out, r.clean("     "+part+" "+s))
		}
	}
	js := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			return "!" + err.Error()
		}
		return string(raw)
	}
	rows := func(n int, f func(i int) string) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = f(i)
		}
		return s
	}
	kv := func(m map[string]string) []string {
		var s []string
		for k, v := range m {
			s = append(s, k+" "+v)
		}
		return s
	}
	add("job", rows(len(b.Jobs), func(i int) string {
		j := b.Jobs[i]
		j.Events = nil // not stored with the row; the events are rows of their own
		return j.ID + " " + js(j)
	}), true)
	evs := slices.Clone(b.Events)
	slices.SortStableFunc(evs, func(a, b store.JobEvent) int { return strings.Compare(a.JobID, b.JobID) })
	add("event", rows(len(evs), func(i int) string {
		e := evs[i]
		return fmt.Sprintf("%s %s -> %s (%s) %q at %s", e.JobID, e.Event.From, e.Event.To, e.Event.Reason, e.Event.Message, r.rel(e.Event.At))
	}), false)
	add("hold", rows(len(b.Holds), func(i int) string { return js(b.Holds[i]) }), true)
	add("delete-hold", slices.Clone(b.DeleteHolds), true)
	add("idempotency", kv(b.Idempotency), true)
	add("setting", kv(b.Settings), true)
	add("node", kv(b.Nodes), true)
	add("audit", rows(len(b.Audit), func(i int) string { return js(b.Audit[i]) }), true)
	add("outbox", rows(len(b.Outbox), func(i int) string {
		o := b.Outbox[i]
		return fmt.Sprintf("%s to %s at %s: %s", o.Kind, o.EndpointID, r.rel(o.CreatedAt), o.Data)
	}), true)
	add("array", rows(len(b.Arrays), func(i int) string { return js(b.Arrays[i]) }), true)
	add("booking", rows(len(b.Bookings), func(i int) string { return js(b.Bookings[i]) }), true)
	add("delete-booking", slices.Clone(b.DeleteBookings), true)
	add("usage", rows(len(b.Usage), func(i int) string { return js(b.Usage[i]) }), true)
	add("ended", rows(len(b.Ended), func(i int) string { return js(b.Ended[i]) }), true)
	add("runs", rows(len(b.Runs), func(i int) string { return js(b.Runs[i]) }), true)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.flush()
	r.lines = append(r.lines, "   commit")
	r.lines = append(r.lines, out...)
}

// recLog is the store as the orchestrator's Log: it commits to the real
// store, and records each batch once it is durable.
type recLog struct {
	st  *store.Store
	rec *recorder
}

func (l recLog) Commit(ctx context.Context, b *store.Batch) error {
	if err := l.st.Commit(ctx, b); err != nil {
		return err
	}
	if !b.Empty() {
		l.rec.batch(b)
	}
	return nil
}

func (l recLog) Load(ctx context.Context) (*store.State, error) { return l.st.Load(ctx) }

// recExec is an executor that records every call and runs nothing: the
// script plays the processes through Sink.
type recExec struct {
	rec           *recorder
	mu            sync.Mutex
	starts, stops []string
}

var (
	_ exec.Executor = (*recExec)(nil)
	_ exec.Noticer  = (*recExec)(nil)
	_ exec.Adopter  = (*recExec)(nil)
	_ exec.Settler  = (*recExec)(nil)
)

func (e *recExec) Start(_ context.Context, t exec.Task) error {
	e.rec.call("start %s", taskText(t))
	e.mu.Lock()
	e.starts = append(e.starts, t.JobID)
	e.mu.Unlock()
	return nil
}

func (e *recExec) Adopt(_ context.Context, t exec.Task) error {
	e.rec.call("adopt %s", taskText(t))
	return nil
}

func (e *recExec) Stop(_ context.Context, id string, attempt int, grace time.Duration) error {
	e.rec.call("stop %s attempt %d grace %s", id, attempt, grace)
	e.mu.Lock()
	e.stops = append(e.stops, id)
	e.mu.Unlock()
	return nil
}

func (e *recExec) Notice(_ context.Context, id string, attempt int, text string) error {
	e.rec.call("notice %s attempt %d %q", id, attempt, text)
	return nil
}

func (e *recExec) Settled(id string, attempt int) {
	e.rec.call("settled %s attempt %d", id, attempt)
}

// take returns the ids in *list, sorted and without repeats, and empties it.
func (e *recExec) take(list *[]string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := slices.Clone(*list)
	*list = nil
	slices.Sort(out)
	return slices.Compact(out)
}

// forget drops a job the script just reported on from the pending starts.
func (e *recExec) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.starts = slices.DeleteFunc(e.starts, func(s string) bool { return s == id })
}

func taskText(t exec.Task) string {
	raw, err := json.Marshal(t)
	if err != nil {
		return "!" + err.Error()
	}
	return string(raw)
}

// recNotifier plans one outbox row per event, to one endpoint, so that
// the batches show every notification the day causes.
type recNotifier struct{}

func (recNotifier) Plan(evs []notify.Event) []store.OutboxItem {
	out := make([]store.OutboxItem, 0, len(evs))
	for _, ev := range evs {
		raw, _ := json.Marshal(ev)
		out = append(out, store.OutboxItem{EndpointID: "golden", Kind: string(ev.Kind), CreatedAt: ev.At,
			State: store.OutboxPending, NextAt: ev.At, Data: string(raw)})
	}
	return out
}

func (recNotifier) Kick() {}

func ptr[T any](v T) *T { return &v }

func raw(s string) api.RawValue { return api.RawValue(s) }

// lineDiff shows the first lines where want and got differ (line by line:
// once a line is added or lost, the rest shifts), each cut around its
// first differing character, after the step header they fall under.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 6; i++ {
		wl, gl := at(w, i), at(g, i)
		if wl == gl {
			continue
		}
		if shown == 0 {
			for k := i - 1; k >= 0; k-- {
				if strings.HasPrefix(w[k], "== ") {
					fmt.Fprintf(&b, "  %d  %s\n", k+1, w[k])
					break
				}
			}
		}
		c := 0
		for c < len(wl) && c < len(gl) && wl[c] == gl[c] {
			c++
		}
		fmt.Fprintf(&b, "- %d  %s\n+ %d  %s\n", i+1, cut(wl, c), i+1, cut(gl, c))
		shown++
	}
	fmt.Fprintf(&b, "(want %d lines, got %d)", len(w), len(g))
	return b.String()
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}

// cut keeps the part of a long line around column c.
func cut(s string, c int) string {
	from, to := max(0, c-80), min(len(s), c+80)
	out := s[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}
