package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/orchestrator"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// fakeClock is the server's clock, moved by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// recorder is an executor that only records what it is asked to start.
type recorder struct {
	mu     sync.Mutex
	starts []exec.Task
}

func (r *recorder) Start(_ context.Context, t exec.Task) error {
	r.mu.Lock()
	r.starts = append(r.starts, t)
	r.mu.Unlock()
	return nil
}

func (r *recorder) Stop(context.Context, string, int, time.Duration) error { return nil }

func (r *recorder) take() []exec.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.starts
	r.starts = nil
	return ts
}

// serverDecisions plays the trace against a real orchestrator (with its
// store) in fake time: at every time something happens, it stops
// scheduling, submits what arrives and reports what ends, then runs one
// cycle, as the simulator does, and records the starts. learned: the
// jobs are submitted without estimated_duration (the server learns run
// times, as the simulator's EstimatesLearned).
func serverDecisions(t *testing.T, jobs []Job, nodes, gpus int, policy string, backfill, learned bool) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &fakeClock{t: jobs[0].Submit}
	rec := &recorder{}
	var ns []orchestrator.Node
	for n := range nodes {
		node := orchestrator.Node{ID: NodeID(n), Hostname: NodeID(n), Simulated: true}
		for g := range gpus {
			node.Devices = append(node.Devices, gpu.Device{Index: g, UUID: fmt.Sprintf("GPU-%d-%d", n, g), Model: "SIM", MemoryMiB: 80 * 1024, Simulated: true})
		}
		ns = append(ns, node)
	}
	o, err := orchestrator.New(ctx, orchestrator.Config{Store: st, Executor: rec, Nodes: ns, DataDir: t.TempDir(), Tick: time.Hour, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if _, err := o.SetPolicies(ctx, api.PoliciesUpdate{Policy: &policy, Backfill: &backfill}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			ch := o.Changed()
			if cond() {
				return
			}
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("server: %s never happened", what)
			}
		}
	}
	type running struct {
		id, name string
		attempt  int
		end      time.Time
	}
	var live []running
	names := map[string]string{} // server id -> trace id
	var out []string
	next := 0
	for next < len(jobs) || len(live) > 0 {
		now := time.Time{}
		if next < len(jobs) {
			now = jobs[next].Submit
		}
		for _, r := range live {
			if now.IsZero() || r.end.Before(now) {
				now = r.end
			}
		}
		if _, err := o.SetScheduling(ctx, false); err != nil {
			t.Fatal(err)
		}
		clock.set(now)
		for ; next < len(jobs) && jobs[next].Submit.Equal(now); next++ {
			j := jobs[next]
			per, n := Gang(j.GPUs, gpus)
			var est api.RawValue
			if !learned {
				est, _ = json.Marshal(j.Duration.Seconds())
			}
			prio, _ := json.Marshal(j.Priority)
			job, _, err := o.Submit(ctx, api.SubmitRequest{Name: j.ID, User: j.User, Project: j.Project, Command: serverCommand,
				GPUCount: &per, Nodes: n, EstimatedDuration: est, Priority: prio}, "")
			if err != nil {
				t.Fatal(err)
			}
			names[job.ID] = j.ID
		}
		var still []running
		for _, r := range live {
			if r.end.Equal(now) {
				o.Sink(exec.Update{JobID: r.id, Attempt: r.attempt, Kind: exec.Exited, At: now})
				waitFor("the end of "+r.name, func() bool { s, _, _ := o.JobState(r.id); return s == api.StateCompleted })
				continue
			}
			still = append(still, r)
		}
		live = still
		before := o.Status().Cycles
		if _, err := o.SetScheduling(ctx, true); err != nil {
			t.Fatal(err)
		}
		waitFor("a cycle", func() bool { return o.Status().Cycles > before })
		// Any later operation is applied after the cycle has launched its
		// tasks: stopping scheduling orders the test after them.
		if _, err := o.SetScheduling(ctx, false); err != nil {
			t.Fatal(err)
		}
		for _, task := range rec.take() {
			name := names[task.JobID]
			var ps []string
			for _, r := range task.Ranks {
				ps = append(ps, fmt.Sprintf("%s%v", r.NodeID, r.GPUs))
			}
			out = append(out, fmt.Sprintf("%.0f start %s on %v", now.Sub(jobs[0].Submit).Seconds(), name, ps))
			o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Started, At: now})
			waitFor("the start of "+name, func() bool { s, _, _ := o.JobState(task.JobID); return s == api.StateRunning })
			i := slices.IndexFunc(jobs, func(j Job) bool { return j.ID == name })
			live = append(live, running{id: task.JobID, name: name, attempt: task.Attempt, end: now.Add(jobs[i].Duration)})
		}
	}
	return out
}

// serverCommand is every job's command on the server; the simulator's
// learned estimates key on it as the server keys on its fingerprint.
const serverCommand = "true"

func simDecisionsWith(t *testing.T, jobs []Job, nodes, gpus int, p sched.Policy) []string {
	return simRecorded(t, jobs, Config{Nodes: nodes, NodeGPUs: gpus, Policy: p})
}

// simRecorded is the simulator's decisions under cfg, as serverDecisions
// writes the server's.
func simRecorded(t *testing.T, jobs []Job, cfg Config) []string {
	cfg.Record = true
	out, err := Run(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ds []string
	for _, d := range out.Decisions {
		var ps []string
		for _, p := range d.Placements {
			ps = append(ps, fmt.Sprintf("%s%v", p.NodeID, p.GPUs))
		}
		ds = append(ds, fmt.Sprintf("%.0f %s %s on %v", d.At.Sub(jobs[0].Submit).Seconds(), d.Kind, d.JobID, ps))
	}
	return ds
}

// The server (the orchestrator with its store, in fake time) and the
// simulator make the same decisions, at the same times, on the same GPUs,
// for the same trace: one scheduling core, fed by the same rules.
func TestServerAndSimulatorAgree(t *testing.T) {
	jobs := randomTrace(11, 40)
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("j%02d", i) // names sort like the server's ids, in submission order
		jobs[i].GPUs = min(jobs[i].GPUs, 8)
	}
	// The same jobs 100 times as long, arriving 100 times as far apart:
	// under fair_share, waits pass sched.DefaultReserveAfter and
	// sched.DefaultStarveAfter, so the reservations that wait and the
	// starving jobs that go first are decided alike too.
	long := longTrace(jobs)
	// Without estimates: the server learns run times from the jobs that
	// ended, as the simulator's learned estimates do (the same names and
	// command); until a user has enough runs its jobs have no estimate,
	// and sjf orders them by attained service (Tiresias).
	learned := slices.Clone(jobs)
	for i := range learned {
		learned[i].Name, learned[i].Command = learned[i].ID, serverCommand
	}
	for _, tc := range []struct {
		name     string
		policy   string
		backfill bool
		jobs     []Job
		learned  bool
	}{{"fcfs", sched.PolicyFCFS, true, jobs, false}, {"fair_share", sched.PolicyFairShare, true, jobs, false}, {"sjf", sched.PolicySJF, false, jobs, false},
		{"fair_share_long", sched.PolicyFairShare, true, long, false}, {"fair_share_tail", sched.PolicyFairShare, true, tailTrace(jobs), false},
		{"fair_share_light", sched.PolicyFairShare, true, stretchTrace(jobs, 10), false},
		{"sjf_learned", sched.PolicySJF, false, learned, true}} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := tc.jobs
			cfg := Config{Nodes: 2, NodeGPUs: 4, Policy: sched.Policy{Name: tc.policy, Backfill: tc.backfill}}
			if tc.learned {
				cfg.Estimates = EstimatesLearned
			}
			want := simRecorded(t, jobs, cfg)
			got := serverDecisions(t, jobs, 2, 4, tc.policy, tc.backfill, tc.learned)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("server and simulator differ\nserver:\n%q\nsim:\n%q", got, want)
			}
			if len(want) != len(jobs) {
				t.Fatalf("%d starts for %d jobs", len(want), len(jobs))
			}
			if tc.learned {
				// Jobs were queued without an estimate (Tiresias's order)
				// and learned ones then reordered the queue: not FCFS's.
				out, _ := Run(jobs, cfg)
				fcfs := cfg
				fcfs.Policy.Name = sched.PolicyFCFS
				if out.Metrics.EstimatesNone == 0 || reflect.DeepEqual(want, simRecorded(t, jobs, fcfs)) {
					t.Fatalf("no job without an estimate (%.2f), or the learned ones changed nothing", out.Metrics.EstimatesNone)
				}
			}
			if tc.name == "fair_share_long" {
				out, _ := Run(jobs, Config{Nodes: 2, NodeGPUs: 4, Policy: sched.Policy{Name: tc.policy, Backfill: true}})
				if out.Metrics.MaxQueue < sched.DefaultStarveAfter.Seconds() {
					t.Fatalf("the longest wait is %.0fs: no job starved, the case tests nothing", out.Metrics.MaxQueue)
				}
			}
		})
	}
}

// longTrace is jobs 100 times as long, arriving 100 times as far apart.
func longTrace(jobs []Job) []Job { return stretchTrace(jobs, 100) }

// stretchTrace is jobs k times as long, arriving k times as far apart.
func stretchTrace(jobs []Job, k time.Duration) []Job {
	long := slices.Clone(jobs)
	for i := range long {
		long[i].Submit = jobs[0].Submit.Add(k * jobs[i].Submit.Sub(jobs[0].Submit))
		long[i].Duration *= k
	}
	return long
}

// tailTrace is jobs with every seventh job 30 times as long: long jobs
// that wait behind short ones go first on the tail (sched's tail.go).
func tailTrace(jobs []Job) []Job {
	out := slices.Clone(jobs)
	for i := 3; i < len(out); i += 7 {
		out[i].Duration *= 30
	}
	return out
}

// The agreement test's traces put jobs on the tail (sched's tail.go), so
// the server and the simulator are compared on it too.
func TestAgreementTracesHaveTailJobs(t *testing.T) {
	jobs := randomTrace(11, 40)
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("j%02d", i)
		jobs[i].GPUs = min(jobs[i].GPUs, 8)
	}
	jobs = tailTrace(jobs)
	off := simDecisionsWith(t, jobs, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true, TailFactor: -1})
	on := simDecisionsWith(t, jobs, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true})
	if reflect.DeepEqual(on, off) {
		t.Fatal("no job went first on the tail: the agreement test does not cover it")
	}
}

// The agreement test's long trace has starving jobs (sched's starve.go),
// and the starving threshold that grows with the backlog (StarveBacklog,
// a default) and the light threshold that shrinks with the queue
// (StarveLightFloor, a default, on the trace 10 times as long) each
// decide some of them, so the server and the simulator are compared on
// all three.
func TestAgreementTracesHaveStarvingJobs(t *testing.T) {
	jobs := randomTrace(11, 40)
	for i := range jobs {
		jobs[i].ID = fmt.Sprintf("j%02d", i)
		jobs[i].GPUs = min(jobs[i].GPUs, 8)
	}
	long := longTrace(jobs)
	defaults := simDecisionsWith(t, long, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true})
	never := simDecisionsWith(t, long, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true, StarveAfter: -1})
	fixed := simDecisionsWith(t, long, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true, StarveBacklog: -1})
	light := stretchTrace(jobs, 10)
	floor := simDecisionsWith(t, light, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true})
	noFloor := simDecisionsWith(t, light, 2, 4, sched.Policy{Name: sched.PolicyFairShare, Backfill: true, StarveLightFloor: -1})
	if reflect.DeepEqual(defaults, never) {
		t.Error("no job went first for starving: the agreement test does not cover it")
	}
	if reflect.DeepEqual(defaults, fixed) {
		t.Error("the backlog threshold changed nothing: the agreement test does not cover it")
	}
	if reflect.DeepEqual(floor, noFloor) {
		t.Error("the light starving floor changed nothing: the agreement test does not cover it")
	}
}
