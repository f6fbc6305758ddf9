package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestKillNineMidLoad kills `corral up` with SIGKILL while submissions are
// in flight and jobs run, restarts it on the same data directory and port,
// and checks that nothing acknowledged was lost, that the jobs running at
// the kill were adopted by the new server (their processes outlive it under
// their shims), that jobs caught between states were requeued or failed as
// "lost" (and their processes are gone), that nothing stays running or
// allocated, and that the restarted server gets on with the work.
func TestKillNineMidLoad(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	d := shellQuote(dir)

	// Six long jobs on one GPU each, half with a retry. Each appends
	// "SHELL_PID CHILD_PID" per attempt to its own file.
	type long struct {
		id         string
		maxRetries int
		shell      int
		child      int
	}
	var longs []*long
	for i := range 6 {
		j := s.submit(map[string]any{
			"command":     fmt.Sprintf(`sleep 30 & echo "$$ $!" >> %s/$CORRAL_JOB_ID.pids; wait`, d),
			"gpu_count":   1,
			"max_retries": i % 2,
			"name":        fmt.Sprintf("long-%d", i),
			"priority":    "critical",
		})
		longs = append(longs, &long{id: j.ID, maxRetries: i % 2})
	}
	for _, l := range longs {
		s.waitState(l.id, api.StateRunning, 30*time.Second)
		path := filepath.Join(dir, l.id+".pids")
		waitFor(t, 30*time.Second, func() string { return "job " + l.id + " to write its pids" }, func() bool {
			b, _ := os.ReadFile(path)
			return strings.HasSuffix(string(b), "\n")
		})
		pids := readPIDs(t, path)
		if len(pids) != 2 {
			t.Fatalf("job %s wrote pids %v", l.id, pids)
		}
		l.shell, l.child = pids[0], pids[1]
	}
	longIDs := map[string]*long{}
	for _, l := range longs {
		longIDs[l.id] = l
	}

	// An 8-GPU job queued behind them, submitted with an Idempotency-Key.
	bigReq := map[string]any{"command": "echo big", "gpu_count": 8, "name": "big", "priority": "normal"}
	bigKey := map[string]string{"Idempotency-Key": "big-before-the-kill"}
	var big api.Job
	if r := s.do("POST", "/queue/submit", bigReq, bigKey); r.Status != 201 || json.Unmarshal(r.Body, &big) != nil || big.ID == "" {
		t.Fatalf("submit the 8-GPU job: %s", r)
	}

	// Acknowledged changes other than submissions: a cancel of a queued
	// job and a priority change.
	gone := s.submit(map[string]any{"command": "echo never", "gpu_count": 8, "priority": "low"})
	s.mustJSON("DELETE", "/queue/"+gone.ID, nil, 200, nil)
	lowered := s.submit(map[string]any{"command": "echo lowered", "gpu_count": 8, "priority": "high"})
	s.mustJSON("PATCH", "/queue/"+lowered.ID+"/priority", map[string]any{"priority": "low"}, 200, nil)

	// Load: 16 submitters of short jobs on the 2 free GPUs (high priority,
	// so they pass the 8-GPU job), some with a retry. SIGKILL lands while
	// they are still submitting.
	var (
		mu      sync.Mutex
		acked   = map[string]bool{big.ID: true}
		early   []string // errors before the kill
		killed  atomic.Bool
		stop    atomic.Bool
		enough  = make(chan struct{})
		enoughO sync.Once
		wg      sync.WaitGroup
	)
	for _, l := range longs {
		acked[l.id] = true
	}
	acked[gone.ID], acked[lowered.ID] = true, true
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				cmd := "true"
				if n%3 == 1 {
					cmd = "sleep 0.05"
				}
				r, err := s.send("POST", "/queue/submit", map[string]any{
					"command": cmd, "gpu_count": 1 + (w+n)%2, "max_retries": n % 2,
					"priority": []string{"high", "critical"}[w%2], "name": fmt.Sprintf("load-%d-%d", w, n),
				}, nil)
				mu.Lock()
				switch {
				case err == nil && r.Status == 201:
					var j api.Job
					if err := json.Unmarshal(r.Body, &j); err != nil || j.ID == "" {
						early = append(early, fmt.Sprintf("bad 201 answer: %v %s", err, truncate(string(r.Body), 200)))
					} else {
						acked[j.ID] = true
					}
					if len(acked) >= 80 {
						enoughO.Do(func() { close(enough) })
					}
				case !killed.Load():
					early = append(early, fmt.Sprintf("submit before the kill: %v %v", err, r))
				}
				mu.Unlock()
				if err != nil && killed.Load() {
					return // the server is gone
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		stop.Store(true)
		wg.Wait()
		t.Fatalf("fewer than 80 submissions acknowledged within 60s; errors: %v", early)
	}
	killed.Store(true)
	s.kill9()
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	if len(early) > 0 {
		t.Fatalf("%d submissions failed before the kill, e.g. %s", len(early), early[0])
	}
	ackedIDs := make([]string, 0, len(acked))
	for id := range acked {
		ackedIDs = append(ackedIDs, id)
	}
	mu.Unlock()
	t.Logf("%d submissions acknowledged before SIGKILL", len(ackedIDs))

	stillAlive := 0
	for _, l := range longs {
		if !processGone(l.child) {
			stillAlive++
		}
	}
	t.Logf("%d of %d long jobs' children outlived the server", stillAlive, len(longs))

	// Restart on the same data directory and port.
	restartAt := time.Now()
	s2 := startServerAt(t, s.DataDir, s.Port)

	// Nothing acknowledged is lost.
	for _, id := range ackedIDs {
		r := s2.do("GET", "/jobs/"+id, nil, nil)
		if r.Status != 200 {
			t.Errorf("acknowledged job %s is gone after the restart: %s", id, r)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if j := s2.job(gone.ID); j.State != api.StateCanceled {
		t.Errorf("job %s was canceled (200) before the kill, but is %s after the restart", gone.ID, j.State)
	}
	if j := s2.job(lowered.ID); j.Priority != api.PriorityLow {
		t.Errorf("job %s was set to low (200) before the kill, but is %s after the restart", lowered.ID, j.Priority)
	}
	// The Idempotency-Key survived too: a retry gets the same job.
	var again api.Job
	if r := s2.do("POST", "/queue/submit", bigReq, bigKey); r.Status != 201 || json.Unmarshal(r.Body, &again) != nil || again.ID != big.ID {
		t.Errorf("resubmitting with the key of %s after the restart: %s", big.ID, r)
	}

	// Nothing is left running from before, and no GPU stays with a job
	// that is not running.
	checkSettled(t, s2, restartAt)

	lostRequeued, lostFailed := 0, 0
	for _, j := range s2.jobs() {
		if e := lostEvent(s2.job(j.ID)); e != nil && e.To == api.StateQueued {
			lostRequeued++
		} else if e != nil {
			lostFailed++
		}
	}
	t.Logf("after the restart: %d jobs requeued and %d failed as lost", lostRequeued, lostFailed)

	// The long jobs outlived the server under their shims: the new server
	// adopted them, still running their first attempt, with nothing lost.
	for _, l := range longs {
		j := s2.job(l.id)
		if e := lostEvent(j); e != nil {
			t.Errorf("long job %s (running at the kill) has an event with reason lost: %+v", l.id, *e)
		}
		if j.State != api.StateRunning || j.RetryCount != 0 {
			t.Errorf("long job %s: %s with retry_count %d after the restart, want running its first attempt (adopted)", l.id, j.State, j.RetryCount)
		}
		if processGone(l.shell) || processGone(l.child) {
			t.Errorf("long job %s: its processes (shell %d, child %d) did not outlive the server", l.id, l.shell, l.child)
		}
	}

	// The backlog of short jobs drains on the new server: every one ends
	// completed, or failed as lost when it died with the server.
	waitFor(t, 60*time.Second, func() string { return "the short jobs to finish after the restart" }, func() bool {
		for _, j := range s2.jobs() {
			if longIDs[j.ID] == nil && j.ID != big.ID && j.ID != lowered.ID && !j.State.Terminal() {
				return false
			}
		}
		return true
	})
	for _, j := range s2.jobs() {
		if longIDs[j.ID] != nil || j.ID == big.ID || j.ID == lowered.ID || j.ID == gone.ID {
			continue
		}
		if j.State == api.StateCompleted || (j.State == api.StateFailed && j.Reason == api.ReasonLost) {
			continue
		}
		t.Errorf("short job %s ended %s (%s: %s)", j.ID, j.State, j.Reason, j.Message)
	}
	checkSettled(t, s2, restartAt)
	if j := s2.job(big.ID); j.State != api.StateQueued {
		t.Errorf("the 8-GPU job is %s while requeued long jobs hold GPUs", j.State)
	}

	// Cancel the rest: everything ends and all 8 GPUs come back.
	for _, j := range s2.jobs() {
		if j.State.Terminal() {
			continue
		}
		r := s2.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil)
		if r.Status != 200 && r.Status != 202 && r.Status != 409 { // 409: it ended meanwhile
			t.Errorf("cancel %s: %s", j.ID, r)
		}
	}
	waitFor(t, 30*time.Second, func() string { return "every job to end after the cancels" }, func() bool {
		for _, j := range s2.jobs() {
			if !j.State.Terminal() {
				return false
			}
		}
		return true
	})
	s2.waitAllGPUsFree(10 * time.Second)
	for _, l := range longs {
		waitFor(t, 10*time.Second, func() string {
			return fmt.Sprintf("the processes of canceled %s (shell %d, child %d) to be gone", l.id, l.shell, l.child)
		}, func() bool { return processGone(l.shell) && processGone(l.child) })
	}
	var st api.OrchestratorStatus
	s2.mustJSON("GET", "/orchestrator/status", nil, 200, &st)
	if st.RunningJobs != 0 || st.QueuedJobs != 0 {
		t.Errorf("orchestrator status after everything ended: %d running, %d queued", st.RunningJobs, st.QueuedJobs)
	}
}

// lostEvent returns the job's first event with reason lost, or nil.
func lostEvent(j api.Job) *api.Event {
	for i := range j.Events {
		if j.Events[i].Reason == api.ReasonLost {
			return &j.Events[i]
		}
	}
	return nil
}

// checkSettled checks the state after a restart: every active job was
// adopted (started before it, nothing lost) or (re)scheduled by the new
// server; every lost job was requeued within its
// retries or failed; no GPU is allocated to a job that is not active.
func checkSettled(t *testing.T, s *server, restartAt time.Time) {
	t.Helper()
	before := map[string]api.Job{}
	for _, j := range s.jobs() {
		before[j.ID] = j
	}
	cs := s.cluster()
	for id := range before {
		j := s.job(id)
		adopted := j.StartedAt != nil && j.StartedAt.Before(restartAt) && lostEvent(j) == nil
		if j.State.Active() && !adopted {
			var sched *api.Event
			for i := range j.Events {
				if j.Events[i].To == api.StateScheduled {
					sched = &j.Events[i]
				}
			}
			if sched == nil || sched.At.Before(restartAt) {
				t.Errorf("job %s is %s, but the new server never scheduled it (events %v)", id, j.State, eventStates(j))
			}
		}
		for _, e := range j.Events {
			if e.Reason != api.ReasonLost {
				continue
			}
			switch e.To {
			case api.StateQueued:
				if j.RetryCount < 1 || j.RetryCount > j.MaxRetries {
					t.Errorf("job %s was requeued as lost with retry_count %d of max_retries %d", id, j.RetryCount, j.MaxRetries)
				}
			case api.StateFailed:
				if j.RetryCount != j.MaxRetries {
					t.Errorf("job %s failed as lost with retries left (%d of %d)", id, j.RetryCount, j.MaxRetries)
				}
			default:
				t.Errorf("job %s: a lost event to %s", id, e.To)
			}
			if e.At.Before(restartAt) {
				t.Errorf("job %s: the lost event is dated %v, before the restart", id, e.At)
			}
		}
	}
	// A GPU allocated to a job that had ended before the GPUs were read is
	// a leak (a job's GPUs are released when it ends).
	for _, n := range cs.Nodes {
		for _, g := range n.GPUs {
			if g.Holder() == "" || g.Held {
				continue
			}
			j, ok := before[g.Holder()]
			switch {
			case !ok:
				t.Errorf("GPU %s/%d is allocated to %q, which is no job", n.NodeID, g.ID, g.Holder())
			case j.State.Terminal():
				t.Errorf("GPU %s/%d is still allocated to %s, which is %s", n.NodeID, g.ID, j.ID, j.State)
			}
		}
	}
}
