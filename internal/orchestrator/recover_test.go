package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store"
)

// settlingExec is adoptingExec that keeps ended attempts until they are
// settled, as the agents' executor does (exec.Settler): it records each
// Settled call with the job as the orchestrator then shows it.
type settlingExec struct {
	*fakeExec
	o       **Orchestrator
	mu      sync.Mutex
	settled map[string]api.Job // by job id: the job as it was when settled
}

func (*settlingExec) Adopt(context.Context, exec.Task) error { return nil }

func (s *settlingExec) Settled(id string, attempt int) {
	j, _ := (*s.o).Job(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled[id] = j
}

func (s *settlingExec) settledJob(id string) (api.Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.settled[id]
	return j, ok
}

// startSettling runs an orchestrator over the store at path with an
// 8-GPU node and a settlingExec.
func startSettling(t *testing.T, path string) (*harness, *settlingExec) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var o *Orchestrator
	ex := &settlingExec{fakeExec: newFakeExec(), o: &o, settled: map[string]api.Job{}}
	o, err = New(ctx, Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Store: st, DataDir: t.TempDir(), Executor: ex})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	h := &harness{t: t, o: o, ex: ex.fakeExec, path: path}
	h.stop = func() { cancel(); <-done; st.Close() }
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
	return h, ex
}

// A job active when the server died is settled, once the restarted
// server hears from its agent, as its attempt really went: an end its
// shim recorded is the job's end, with its exit code, never a loss or a
// second run; an attempt adopted while scheduled or allocating that no
// agent ever ran (Unstarted) goes back to the queue without counting a
// retry and runs again; one that ran and is lost is lost as ever. A job
// of no GPUs names no node; on a cluster of one node it is adopted there.
// The
// executor is told each end is settled only once it is committed.
func TestRecoverSettlesAdoptedAttempts(t *testing.T) {
	tests := []struct {
		name       string
		gpus       int
		running    bool // reported started before the kill
		maxRetries int
		report     []exec.Update // after the restart (JobID and Attempt filled in)
		want       api.State
		reason     string
		exit       int // -1: none
		retries    int
		startAgain bool
	}{
		{"running, its end recorded before the kill", 1, true, 2,
			[]exec.Update{{Kind: exec.Exited, ExitCode: 3}}, api.StateFailed, api.ReasonExitCode, 3, 0, false},
		{"no GPUs (its node is the only one), its end recorded before the kill", 0, true, 0,
			[]exec.Update{{Kind: exec.Exited, ExitCode: 3}}, api.StateFailed, api.ReasonExitCode, 3, 0, false},
		{"allocating, ran and ended before the kill", 1, false, 0,
			[]exec.Update{{Kind: exec.Started}, {Kind: exec.Exited, ExitCode: 0}}, api.StateCompleted, api.ReasonExited, 0, 0, false},
		{"allocating, never started", 1, false, 0,
			[]exec.Update{{Kind: exec.Exited, ExitCode: -1, Lost: api.ReasonLost, Unstarted: true, Err: errors.New("lost: the agent on n1 restarted without it")}},
			api.StateAllocating, "", -1, 0, true},
		{"running, lost", 1, true, 0,
			[]exec.Update{{Kind: exec.Exited, ExitCode: -1, Lost: api.ReasonLost, Unstarted: true, Err: errors.New("lost: the agent on n1 restarted without it")}},
			api.StateFailed, api.ReasonLost, -1, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "corral.db")
			h := start(t, path, nil)
			j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(tc.gpus), MaxRetries: tc.maxRetries})
			h.nextStart()
			if tc.running {
				h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: time.Now()})
				h.waitState(j.ID, api.StateRunning)
			}
			h.stop() // the kill: the store has what was committed
			h.stop = nil

			h, ex := startSettling(t, path)
			for _, u := range tc.report {
				u.JobID, u.At = j.ID, time.Now()
				h.o.Sink(u)
			}
			var got api.Job
			if tc.startAgain {
				task := h.nextStart()
				if task.JobID != j.ID || task.Attempt != 0 {
					t.Fatalf("started %s attempt %d; want %s again as attempt 0", task.JobID, task.Attempt, j.ID)
				}
				got = h.waitState(j.ID, api.StateAllocating)
				if !hasEvent(got, api.StateQueued) {
					t.Errorf("events %+v; want a requeue", got.Events)
				}
			} else {
				got = h.waitFor(j.ID, func(j api.Job) bool { return j.State.Terminal() })
			}
			if got.State != tc.want || tc.reason != "" && got.Reason != tc.reason {
				t.Errorf("job %s (%s: %s); want %s (%s)", got.State, got.Reason, got.Message, tc.want, tc.reason)
			}
			if tc.exit >= 0 && (got.ExitCode == nil || *got.ExitCode != tc.exit) {
				t.Errorf("exit code %v; want %d", got.ExitCode, tc.exit)
			}
			if got.RetryCount != tc.retries {
				t.Errorf("retry_count %d; want %d", got.RetryCount, tc.retries)
			}
			// Settled once the end is committed: the job as settled shows it.
			deadline := time.Now().Add(5 * time.Second)
			s, ok := ex.settledJob(j.ID)
			for ; !ok && time.Now().Before(deadline); s, ok = ex.settledJob(j.ID) {
				time.Sleep(5 * time.Millisecond) // the after-commit hook runs on the loop
			}
			if !ok {
				t.Fatal("the end was never settled")
			}
			if s.State == api.StateRunning || s.State == api.StateAllocating && !tc.startAgain {
				t.Errorf("settled while the job was %s: before its end was applied", s.State)
			}
		})
	}
}

func hasEvent(j api.Job, to api.State) bool {
	for _, e := range j.Events[1:] {
		if e.To == to {
			return true
		}
	}
	return false
}
