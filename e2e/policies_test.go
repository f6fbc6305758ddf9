package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests drive the scheduling policies on a live
// `corral up --simulate-gpus 8`: fair share, priority preemption with
// notices and grace, EASY backfill around a blocked gang, quota borrowing
// and reclaim, and the policies API itself.

// setPolicies PUTs a policies update and requires 200.
func (s *server) setPolicies(update map[string]any) api.Policies {
	s.t.Helper()
	var p api.Policies
	s.mustJSON("PUT", "/orchestrator/policies", update, http.StatusOK, &p)
	return p
}

// getPolicies reads GET /orchestrator/policies.
func (s *server) getPolicies() api.Policies {
	s.t.Helper()
	var p api.Policies
	s.mustJSON("GET", "/orchestrator/policies", nil, http.StatusOK, &p)
	return p
}

// queue reads GET /queue.
func (s *server) queue() api.QueueResponse {
	s.t.Helper()
	var q api.QueueResponse
	s.mustJSON("GET", "/queue", nil, http.StatusOK, &q)
	return q
}

// logsAttempt reads the output of one attempt of a job.
func (s *server) logsAttempt(id string, attempt int) string {
	s.t.Helper()
	r := s.do("GET", "/jobs/"+id+"/logs?attempt="+strconv.Itoa(attempt), nil, nil)
	if r.Status != http.StatusOK {
		s.t.Fatalf("logs of %s attempt %d: %s", id, attempt, r)
	}
	return string(r.Body)
}

// holdCmd is a job command that runs until the test creates
// DIR/release-NAME or DIR/release-all.
func holdCmd(dir, name string) string {
	d := shellQuote(dir)
	return fmt.Sprintf(`while [ ! -e %s/release-%s ] && [ ! -e %s/release-all ]; do sleep 0.05; done`, d, name, d)
}

// release lets the jobs held by holdCmd(dir, name) end.
func release(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "release-"+name), nil, 0o644); err != nil {
		t.Fatalf("release %s: %v", name, err)
	}
}

// waitAllCompleted polls until every listed job has ended, and requires
// each to have completed.
func (s *server) waitAllCompleted(ids []string, timeout time.Duration) {
	s.t.Helper()
	left := 0
	waitFor(s.t, timeout, func() string { return fmt.Sprintf("all %d jobs to end (%d left)", len(ids), left) }, func() bool {
		left = 0
		byID := map[string]api.Job{}
		for _, j := range s.jobs() {
			byID[j.ID] = j
		}
		for _, id := range ids {
			if !byID[id].State.Terminal() {
				left++
			}
		}
		return left == 0
	})
	for _, id := range ids {
		if j := s.job(id); j.State != api.StateCompleted {
			s.t.Errorf("job %s ended %s (reason %q: %s)", id, j.State, j.Reason, j.Message)
		}
	}
}

// lastEvent is the job's latest event.
func lastEvent(t *testing.T, j api.Job) api.Event {
	t.Helper()
	if len(j.Events) == 0 {
		t.Fatalf("job %s has no events", j.ID)
	}
	return j.Events[len(j.Events)-1]
}

// readNanos reads the first "date +%s%N" line of a file.
func readNanos(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Fatalf("%s is empty", path)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatalf("%s holds %q: %v", path, string(b), err)
	}
	return time.Unix(0, n)
}

// TestFairShareSplitsCluster: user A queues 12 one-GPU jobs, then user B
// queues 12. Under fair_share the 8 GPUs are dealt in turn, 4 and 4, not
// 8 to A because A came first. The orchestrator is stopped while both
// submit (otherwise A's first 8 jobs would rightly start on idle GPUs
// before B asked for anything, and with preemption off nothing would take
// them back); the first cycle after the start sees both queues at once.
func TestFairShareSplitsCluster(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	p := s.setPolicies(map[string]any{"policy": "fair_share"})
	if p.Policy != "fair_share" {
		t.Fatalf("policy after PUT is %q", p.Policy)
	}
	var st api.OrchestratorStatus
	s.mustJSON("POST", "/orchestrator/stop", nil, http.StatusOK, &st)

	owner := map[string]string{}
	var ids []string
	for _, u := range []string{"ana", "ben"} {
		for i := range 12 {
			j := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "user": u,
				"name": fmt.Sprintf("%s-%d", u, i)})
			owner[j.ID] = u
			ids = append(ids, j.ID)
		}
	}
	s.mustJSON("POST", "/orchestrator/start", nil, http.StatusOK, &st)

	count := func() (active map[string]int, total int) {
		active = map[string]int{}
		for _, j := range s.jobs() {
			if j.State.Active() {
				active[j.User]++
				total++
			}
		}
		return active, total
	}
	var active map[string]int
	var total int
	waitFor(t, 20*time.Second, func() string { return fmt.Sprintf("8 jobs holding GPUs (have %d: %v)", total, active) }, func() bool {
		active, total = count()
		return total == 8
	})
	if active["ana"] != 4 || active["ben"] != 4 {
		t.Errorf("with 8 GPUs full, fair share gave ana %d and ben %d GPUs; want 4 and 4", active["ana"], active["ben"])
	}
	if c := s.cluster(); c.AllocatedGPUs != 8 || c.AvailableGPUs != 0 {
		t.Errorf("cluster: allocated %d, available %d; want 8 and 0", c.AllocatedGPUs, c.AvailableGPUs)
	}
	// Nothing more starts while they hold the GPUs, and the split holds.
	time.Sleep(300 * time.Millisecond)
	if active, total = count(); total != 8 || active["ana"] != 4 || active["ben"] != 4 {
		t.Errorf("later: %d jobs hold GPUs, split %v; want 8, 4/4", total, active)
	}
	// Every waiting job says why.
	for _, j := range s.jobs() {
		if j.State == api.StateQueued && (j.PendingReason == "" || j.PendingMessage == "") {
			t.Errorf("queued job %s has no pending reason/message (%q, %q)", j.ID, j.PendingReason, j.PendingMessage)
		}
	}

	release(t, dir, "all")
	s.waitAllCompleted(ids, 30*time.Second)
	s.waitAllGPUsFree(10 * time.Second)

	// activeBy counts the GPUs each of the given users' jobs hold.
	activeBy := func(users ...string) (map[string]int, int) {
		m, n := map[string]int{}, 0
		for _, j := range s.jobs() {
			if j.State.Active() && slices.Contains(users, j.User) {
				m[j.User] += len(j.Allocation)
				n += len(j.Allocation)
			}
		}
		return m, n
	}

	// With the loop running and preemption off, carl, who came first, takes
	// all 8 idle GPUs (nothing takes them back); when his first 8 jobs end,
	// the freed GPUs are dealt fairly: dana, with no usage, gets at least
	// half of them although carl still has 12 jobs queued ahead of hers.
	t.Run("freed_GPUs_go_to_the_user_below_share", func(t *testing.T) {
		s := s.on(t)
		dir := t.TempDir()
		d := shellQuote(dir)
		// A carl job started before release-carl1 ends with it; one started
		// after holds until release-all.
		carlCmd := fmt.Sprintf(`if [ -e %[1]s/release-carl1 ]; then n=all; else n=carl1; fi
while [ ! -e %[1]s/release-$n ] && [ ! -e %[1]s/release-all ]; do sleep 0.05; done`, d)
		var ids []string
		for i := range 20 {
			ids = append(ids, s.submit(map[string]any{"command": carlCmd, "gpu_count": 1, "user": "carl", "name": fmt.Sprintf("carl-%d", i)}).ID)
		}
		var m map[string]int
		var n int
		waitFor(t, 20*time.Second, func() string { return fmt.Sprintf("carl to hold 8 GPUs (%v)", m) }, func() bool {
			m, n = activeBy("carl", "dana")
			return m["carl"] == 8
		})
		for i := range 12 {
			ids = append(ids, s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "user": "dana", "name": fmt.Sprintf("dana-%d", i)}).ID)
		}
		time.Sleep(200 * time.Millisecond)
		if m, _ = activeBy("carl", "dana"); m["carl"] != 8 {
			t.Errorf("with preemption off, dana's arrival changed carl's GPUs: %v", m)
		}
		release(t, dir, "carl1")
		waitFor(t, 20*time.Second, func() string { return fmt.Sprintf("carl's first jobs to end and 8 GPUs to be busy again (%v)", m) }, func() bool {
			done := 0
			for _, j := range s.jobs() {
				if j.User == "carl" && j.State == api.StateCompleted {
					done++
				}
			}
			m, n = activeBy("carl", "dana")
			return done >= 8 && n == 8
		})
		time.Sleep(200 * time.Millisecond)
		m, _ = activeBy("carl", "dana")
		t.Logf("after carl's first wave: %v", m)
		if m["dana"] < 4 {
			t.Errorf("after carl's first 8 jobs ended, dana holds %d of 8 GPUs (carl %d); fair share should give her at least 4", m["dana"], m["carl"])
		}
		release(t, dir, "all")
		s.waitAllCompleted(ids, 30*time.Second)
		s.waitAllGPUsFree(10 * time.Second)
	})

	// With preemption on, a user under their share takes GPUs from one
	// over it until the split is even, and then nothing thrashes.
	t.Run("preemption_evens_the_split", func(t *testing.T) {
		s := s.on(t)
		dir := t.TempDir()
		s.setPolicies(map[string]any{"preemption": true, "min_run_time": 0, "preempt_grace": "1s"})
		defer s.setPolicies(map[string]any{"preemption": false})
		var ids []string
		// erin's jobs take half a second to checkpoint on SIGTERM, as real
		// ones do: GPUs being freed must not be freed twice over.
		erinCmd := "trap 'sleep 0.5; exit 0' TERM\n" + holdCmd(dir, "all")
		for i := range 8 {
			ids = append(ids, s.submit(map[string]any{"command": erinCmd, "gpu_count": 1, "user": "erin", "name": fmt.Sprintf("erin-%d", i)}).ID)
		}
		var m map[string]int
		waitFor(t, 20*time.Second, func() string { return fmt.Sprintf("erin to hold 8 GPUs (%v)", m) }, func() bool {
			m, _ = activeBy("erin", "fred")
			return m["erin"] == 8
		})
		for i := range 8 {
			ids = append(ids, s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "user": "fred", "name": fmt.Sprintf("fred-%d", i)}).ID)
		}
		waitFor(t, 20*time.Second, func() string { return fmt.Sprintf("a 4/4 split (%v)", m) }, func() bool {
			m, _ = activeBy("erin", "fred")
			return m["erin"] == 4 && m["fred"] == 4
		})
		time.Sleep(1500 * time.Millisecond) // longer than grace and checkpoint: any further preemption would show
		preempted := 0
		for _, j := range s.jobs() {
			if j.User != "erin" && j.User != "fred" {
				continue
			}
			if j.User == "fred" && j.Preemptions > 0 {
				t.Errorf("fred's job %s was preempted %d times: thrash", j.Name, j.Preemptions)
			}
			if j.User == "erin" && j.Preemptions > 0 {
				preempted++
				if j.Preemptions != 1 || j.State != api.StateQueued {
					t.Errorf("erin's job %s: preemptions %d, state %s; want 1, queued", j.Name, j.Preemptions, j.State)
				}
				if e := lastEvent(t, s.job(j.ID)); e.Reason != api.ReasonPreempted || !strings.Contains(e.Message, "fair share") {
					t.Errorf("erin's job %s: last event %+v; want preempted, naming fair share", j.Name, e)
				}
			}
		}
		if m, _ = activeBy("erin", "fred"); m["erin"] != 4 || m["fred"] != 4 || preempted != 4 {
			t.Errorf("a second later: split %v, %d of erin's jobs preempted; want 4/4 and 4", m, preempted)
		}
		release(t, dir, "all")
		s.waitAllCompleted(ids, 30*time.Second)
		s.waitAllGPUsFree(10 * time.Second)
	})
}

// TestPreemptionSignalsAndRequeues: under the priority policy with
// preemption on, a high-priority job preempts a running low one. The
// victim finds the notice in $CORRAL_PREEMPT_NOTICE when SIGTERM comes,
// checkpoints and exits; it goes back to queued (reason preempted,
// retry_count and preemptions 1), waits while the high job runs, and
// reruns as attempt 1 when the GPUs are free again. A victim that ignores
// SIGTERM is SIGKILLed after its own preempt_grace.
func TestPreemptionSignalsAndRequeues(t *testing.T) {
	s := startServer(t)
	p := s.setPolicies(map[string]any{"policy": "priority", "preemption": true, "min_run_time": 0, "preempt_grace": "10s"})
	if p.Policy != "priority" || !p.Preemption || p.MinRunTime != 0 {
		t.Fatalf("policies after PUT: %+v", p)
	}

	t.Run("cooperative", func(t *testing.T) {
		s := s.on(t)
		dir := t.TempDir()
		d := shellQuote(dir)
		lowCmd := fmt.Sprintf(`
if [ "$CORRAL_ATTEMPT" != 0 ]; then echo "resumed attempt $CORRAL_ATTEMPT from: $(cat %[1]s/ckpt)"; exit 0; fi
[ -e "$CORRAL_PREEMPT_NOTICE" ] && echo "notice present too early"
echo "$CORRAL_PREEMPT_NOTICE" > %[1]s/noticepath
trap 'date +%%s%%N > %[1]s/term; cat "$CORRAL_PREEMPT_NOTICE" > %[1]s/ckpt.tmp && mv %[1]s/ckpt.tmp %[1]s/ckpt; echo checkpointed; exit 0' TERM
touch %[1]s/started
while true; do sleep 0.05; done`, d)
		low := s.submit(map[string]any{"command": lowCmd, "gpu_count": 8, "priority": "low", "user": "lou", "name": "low"})
		s.waitState(low.ID, api.StateRunning, 20*time.Second)
		waitFor(t, 10*time.Second, func() string { return "the low job to be up" }, func() bool { return fileExists(filepath.Join(dir, "started")) })

		high := s.submit(map[string]any{"command": holdCmd(dir, "high"), "gpu_count": 4, "priority": "high", "user": "hal", "name": "high"})

		lj := s.waitJob(low.ID, 20*time.Second, "to be requeued after preemption", func(j api.Job) bool {
			return j.RetryCount >= 1
		})
		hj := s.waitState(high.ID, api.StateRunning, 20*time.Second)
		lj = s.job(low.ID)
		if lj.State != api.StateQueued {
			t.Errorf("preempted low job is %s while the high job holds 4 of its 8 GPUs; want queued", lj.State)
		}
		if lj.RetryCount != 1 || lj.Preemptions != 1 {
			t.Errorf("low job: retry_count %d, preemptions %d; want 1 and 1", lj.RetryCount, lj.Preemptions)
		}
		var requeue *api.Event
		for i := range lj.Events {
			if e := lj.Events[i]; e.To == api.StateQueued && e.From != "" {
				requeue = &lj.Events[i]
			}
		}
		if requeue == nil {
			t.Fatalf("low job has no requeue event: %+v", lj.Events)
		}
		if requeue.Reason != api.ReasonPreempted || requeue.From != api.StateRunning {
			t.Errorf("requeue event %+v; want running -> queued, reason preempted", *requeue)
		}
		if !strings.Contains(requeue.Message, high.ID) {
			t.Errorf("requeue event message %q does not name the preempting job %s", requeue.Message, high.ID)
		}
		if lj.Preempting {
			t.Errorf("a requeued job still says preempting")
		}
		if len(lj.Allocation) != 0 {
			t.Errorf("requeued low job still holds %v", lj.Allocation)
		}
		if len(hj.Allocation) != 4 {
			t.Errorf("high job holds %d GPUs, want 4", len(hj.Allocation))
		}

		// The job saw the notice at SIGTERM, and the notice was there first.
		ckpt, err := os.ReadFile(filepath.Join(dir, "ckpt"))
		if err != nil {
			t.Fatalf("the victim did not checkpoint the notice on SIGTERM: %v; log:\n%s", err, s.logsAttempt(low.ID, 0))
		}
		if !strings.Contains(string(ckpt), "preempt") || !strings.Contains(string(ckpt), high.ID) {
			t.Errorf("notice the job read: %q; want a preemption notice naming %s", ckpt, high.ID)
		}
		np, _ := os.ReadFile(filepath.Join(dir, "noticepath"))
		noticePath := strings.TrimSpace(string(np))
		if noticePath == "" {
			t.Errorf("CORRAL_PREEMPT_NOTICE was empty in the job")
		} else if fi, err := os.Stat(noticePath); err != nil {
			t.Errorf("notice file %s: %v", noticePath, err)
		} else if term := readNanos(t, filepath.Join(dir, "term")); fi.ModTime().After(term.Add(20 * time.Millisecond)) {
			t.Errorf("notice written at %s, after SIGTERM arrived at %s", fi.ModTime().Format(time.RFC3339Nano), term.Format(time.RFC3339Nano))
		}
		log0 := s.logsAttempt(low.ID, 0)
		if !strings.Contains(log0, "checkpointed") || strings.Contains(log0, "too early") {
			t.Errorf("attempt 0 log: %q", log0)
		}

		// The low job waits while the high one runs, then reruns.
		time.Sleep(200 * time.Millisecond)
		if lj = s.job(low.ID); lj.State != api.StateQueued || lj.PendingReason == "" {
			t.Errorf("low job while high runs: state %s, pending %q; want queued with a reason", lj.State, lj.PendingReason)
		}
		release(t, dir, "high")
		s.waitState(high.ID, api.StateCompleted, 20*time.Second)
		lj = s.waitState(low.ID, api.StateCompleted, 20*time.Second)
		if lj.RetryCount != 1 || lj.Preemptions != 1 {
			t.Errorf("low job at the end: retry_count %d, preemptions %d; want 1 and 1", lj.RetryCount, lj.Preemptions)
		}
		if log1 := s.logsAttempt(low.ID, 1); !strings.Contains(log1, "resumed attempt 1 from: preempted") {
			t.Errorf("attempt 1 log: %q; want it to resume from the checkpointed notice", log1)
		}
		want := []api.State{api.StateQueued, api.StateScheduled, api.StateAllocating, api.StateRunning,
			api.StateQueued, api.StateScheduled, api.StateAllocating, api.StateRunning, api.StateCompleted}
		if got := eventStates(lj); !reflect.DeepEqual(got, want) {
			t.Errorf("low job events %v; want %v", got, want)
		}
		s.waitAllGPUsFree(10 * time.Second)
	})

	// Never preempt for a job that still would not fit: an 8-GPU high job
	// cannot get the GPUs a critical job holds, so the low job beside it
	// keeps running.
	t.Run("no_preemption_that_would_not_help", func(t *testing.T) {
		s := s.on(t)
		dir := t.TempDir()
		crit := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 4, "priority": "critical", "user": "cat"})
		low := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 4, "priority": "low", "user": "lou"})
		s.waitState(crit.ID, api.StateRunning, 20*time.Second)
		s.waitState(low.ID, api.StateRunning, 20*time.Second)
		high := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 8, "priority": "high", "user": "hal"})
		hj := s.waitJob(high.ID, 10*time.Second, "to say why it waits", func(j api.Job) bool { return j.PendingReason != "" })
		time.Sleep(500 * time.Millisecond)
		if lj := s.job(low.ID); lj.State != api.StateRunning || lj.Preempting || lj.Preemptions != 0 {
			t.Errorf("low job preempted for a job that still cannot fit: state %s, preempting %v, preemptions %d (%s)",
				lj.State, lj.Preempting, lj.Preemptions, lj.PreemptMessage)
		}
		if hj = s.job(high.ID); hj.State != api.StateQueued || hj.PendingReason == "preempting" {
			t.Errorf("high job: state %s, pending %q (%s)", hj.State, hj.PendingReason, hj.PendingMessage)
		}
		release(t, dir, "all")
		s.waitAllCompleted([]string{crit.ID, low.ID, high.ID}, 20*time.Second)
		s.waitAllGPUsFree(10 * time.Second)
	})

	t.Run("ignores_TERM_killed_after_grace", func(t *testing.T) {
		s := s.on(t)
		dir := t.TempDir()
		d := shellQuote(dir)
		// The trap records SIGTERM and carries on: the job ignores it.
		cmd := fmt.Sprintf(`
if [ "$CORRAL_ATTEMPT" != 0 ]; then exit 0; fi
trap 'date +%%s%%N >> %[1]s/term' TERM
touch %[1]s/started
while true; do sleep 0.05; done`, d)
		victim := s.submit(map[string]any{"command": cmd, "gpu_count": 8, "priority": "low", "user": "lou",
			"name": "stubborn", "preempt_grace": "1s"})
		if victim.PreemptGrace == nil || *victim.PreemptGrace != 1 {
			t.Errorf("submitted preempt_grace \"1s\", job says %v", victim.PreemptGrace)
		}
		s.waitState(victim.ID, api.StateRunning, 20*time.Second)
		waitFor(t, 10*time.Second, func() string { return "the victim to be up" }, func() bool { return fileExists(filepath.Join(dir, "started")) })

		high := s.submit(map[string]any{"command": holdCmd(dir, "high"), "gpu_count": 4, "priority": "critical", "user": "hal"})
		sawPreempting := false
		var seenMsg string
		vj := s.waitJob(victim.ID, 20*time.Second, "to be requeued", func(j api.Job) bool {
			if j.Preempting {
				sawPreempting, seenMsg = true, j.PreemptMessage
			}
			return j.RetryCount >= 1
		})
		if !sawPreempting {
			t.Errorf("never saw preempting=true during the 1s grace")
		} else if !strings.Contains(seenMsg, high.ID) {
			t.Errorf("preempt_message %q does not name %s", seenMsg, high.ID)
		}
		requeue := lastEvent(t, vj)
		if vj.State == api.StateQueued {
			if requeue.Reason != api.ReasonPreempted {
				t.Errorf("requeue event reason %q, want preempted", requeue.Reason)
			}
		} else {
			// It may already rerun; find the requeue event.
			for _, e := range vj.Events {
				if e.To == api.StateQueued && e.From != "" {
					requeue = e
				}
			}
		}
		term := readNanos(t, filepath.Join(dir, "term"))
		gap := requeue.At.Sub(term)
		t.Logf("SIGTERM at %s, attempt ended at %s: %v", term.Format(time.RFC3339Nano), requeue.At.Format(time.RFC3339Nano), gap)
		// The job stamps "term" from its trap, which a loaded machine may
		// run a few hundred milliseconds after the signal: the lower bound
		// only tells a grace honoured from a kill at once.
		if gap < 500*time.Millisecond || gap > 8*time.Second {
			t.Errorf("the attempt ended %v after SIGTERM; want about the 1s grace (0.5s..8s)", gap)
		}
		if vj.Preemptions != 1 || vj.RetryCount != 1 {
			t.Errorf("victim: retry_count %d, preemptions %d; want 1 and 1", vj.RetryCount, vj.Preemptions)
		}
		s.waitState(high.ID, api.StateRunning, 20*time.Second)
		release(t, dir, "high")
		s.waitAllCompleted([]string{high.ID, victim.ID}, 20*time.Second)
		s.waitAllGPUsFree(10 * time.Second)
	})
}

// TestBackfillAroundBlockedGang: under fcfs with backfill, an 8-GPU gang
// that cannot start holds a reservation at the end of the running jobs'
// estimates; a short job that ends before it starts at once, a long job
// and a job without an estimate wait with reason "reservation" naming the
// gang, and the gang's estimated start does not move later. With backfill
// off nothing passes the head.
func TestBackfillAroundBlockedGang(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	p := s.setPolicies(map[string]any{"policy": "fcfs", "backfill": true})
	if p.Policy != "fcfs" || !p.Backfill {
		t.Fatalf("policies after PUT: %+v", p)
	}
	var all []string
	sub := func(name string, gpus int, est any) api.Job {
		t.Helper()
		req := map[string]any{"command": holdCmd(dir, name), "gpu_count": gpus, "user": "ana", "name": name}
		if est != nil {
			req["estimated_duration"] = est
		}
		j := s.submit(req)
		all = append(all, j.ID)
		return j
	}

	// 6 GPUs busy for an estimated hour.
	var latestEnd time.Time
	for i := range 3 {
		f := sub(fmt.Sprintf("fill%d", i), 2, "1h")
		f = s.waitState(f.ID, api.StateRunning, 20*time.Second)
		if end := f.StartedAt.Add(time.Hour); end.After(latestEnd) {
			latestEnd = end
		}
	}

	gang := sub("gang", 8, "30m")
	var g api.Job
	g = s.waitJob(gang.ID, 10*time.Second, "to carry an estimated start", func(j api.Job) bool {
		return j.State == api.StateQueued && j.EstimatedStartTime != nil && j.PendingReason != ""
	})
	before := *g.EstimatedStartTime
	if d := before.Sub(latestEnd); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("gang estimated_start_time %s; want about the running jobs' estimated end %s (off by %v)",
			before.Format(time.RFC3339), latestEnd.Format(time.RFC3339), d)
	}
	t.Logf("gang: pending %q: %s; estimated start %s", g.PendingReason, g.PendingMessage, before.Format(time.RFC3339))

	// A long job and one with no estimate would fit in the 2 free GPUs but
	// would delay the gang.
	long := sub("long", 2, "3h")
	noEst := sub("noest", 2, nil)
	for _, id := range []string{long.ID, noEst.ID} {
		j := s.waitJob(id, 10*time.Second, "to wait for the reservation", func(j api.Job) bool {
			return j.PendingReason == "reservation"
		})
		if j.State != api.StateQueued {
			t.Errorf("job %s is %s; want queued", j.Name, j.State)
		}
		if !strings.Contains(j.PendingMessage, gang.ID) {
			t.Errorf("job %s pending message %q does not name the head job %s", j.Name, j.PendingMessage, gang.ID)
		}
	}

	// A short job ends before the reservation: it is backfilled at once.
	short := sub("short", 2, "10m")
	sj := s.waitState(short.ID, api.StateRunning, 10*time.Second)
	if len(sj.Allocation) != 2 {
		t.Errorf("short job holds %d GPUs", len(sj.Allocation))
	}
	for _, id := range []string{long.ID, noEst.ID} {
		if j := s.job(id); j.State != api.StateQueued {
			t.Errorf("job %s is %s after the backfill; want queued", j.Name, j.State)
		}
	}
	g = s.waitJob(gang.ID, 10*time.Second, "to have an estimate", func(j api.Job) bool { return j.EstimatedStartTime != nil })
	if g.State != api.StateQueued {
		t.Fatalf("gang is %s; want queued", g.State)
	}
	if g.EstimatedStartTime.After(before.Add(time.Second)) {
		t.Errorf("the backfill delayed the gang: estimated start %s, was %s", g.EstimatedStartTime.Format(time.RFC3339), before.Format(time.RFC3339))
	}
	// GET /queue agrees.
	q := s.queue()
	found := false
	for _, row := range q.QueuedJobs {
		if row.ID != gang.ID {
			continue
		}
		found = true
		if row.EstimatedStartTime == nil || row.EstimatedWaitTime == nil {
			t.Errorf("GET /queue gang row lacks estimates: %+v", row)
		} else if w := *row.EstimatedWaitTime; w < 3000 || w > 3700 {
			t.Errorf("GET /queue gang estimated_wait_time %v s; want about an hour", w)
		}
		if row.QueuePosition != 1 {
			t.Errorf("gang queue_position %d; want 1", row.QueuePosition)
		}
	}
	if !found {
		t.Errorf("gang %s not in GET /queue", gang.ID)
	}
	// Every queued job has a start estimate, and those behind the gang
	// start no earlier than it.
	for _, row := range q.QueuedJobs {
		if row.EstimatedStartTime == nil {
			t.Errorf("GET /queue row %s (%s) has no estimated_start_time", row.ID, row.Name)
			continue
		}
		if row.ID != gang.ID && row.EstimatedStartTime.Before(*g.EstimatedStartTime) {
			t.Errorf("job %s is estimated to start at %s, before the gang it waits behind (%s)",
				row.Name, row.EstimatedStartTime.Format(time.RFC3339), g.EstimatedStartTime.Format(time.RFC3339))
		}
	}

	// Backfill off: free 2 GPUs; nothing passes the head any more.
	release(t, dir, "short")
	s.waitState(short.ID, api.StateCompleted, 10*time.Second)
	p = s.setPolicies(map[string]any{"backfill": false})
	if p.Backfill {
		t.Fatalf("backfill still on after PUT")
	}
	short2 := sub("short2", 2, "10m")
	for _, id := range []string{short2.ID, long.ID, noEst.ID} {
		j := s.waitJob(id, 10*time.Second, "to wait for the head", func(j api.Job) bool {
			return j.PendingReason == "waiting_for_head"
		})
		if !strings.Contains(j.PendingMessage, gang.ID) {
			t.Errorf("job %s pending message %q does not name the head job %s", j.Name, j.PendingMessage, gang.ID)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if j := s.job(short2.ID); j.State != api.StateQueued {
		t.Errorf("with backfill off a short job passed the head: %s", j.State)
	}
	if c := s.cluster(); c.AvailableGPUs != 2 {
		t.Errorf("available GPUs %d with backfill off; want 2 left idle for the head", c.AvailableGPUs)
	}

	release(t, dir, "all")
	s.waitAllCompleted(all, 30*time.Second)
	// fcfs: the gang started before the jobs queued behind it.
	gj := s.job(gang.ID)
	for _, id := range []string{long.ID, noEst.ID, short2.ID} {
		if j := s.job(id); j.StartedAt != nil && gj.StartedAt != nil && j.StartedAt.Before(*gj.StartedAt) {
			t.Errorf("job %s started %s, before the gang %s", j.Name, j.StartedAt, gj.StartedAt)
		}
	}
}

// TestQuotaBorrowing: project vision has a quota of 4 of the 8 GPUs; its
// 6 jobs run, 2 of them on borrowed GPUs. When project nlp (quota 4)
// asks, the borrowed GPUs are taken back, with preemption switched off.
func TestQuotaBorrowing(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	p := s.setPolicies(map[string]any{"min_run_time": 0, "preempt_grace": "1s",
		"quotas": map[string]any{"projects": map[string]any{"vision": 4, "nlp": 4}}})
	if p.Preemption || p.Quotas.Projects["vision"] != 4 || p.Quotas.Projects["nlp"] != 4 {
		t.Fatalf("policies after PUT: %+v", p)
	}
	var vision []string
	for i := range 6 {
		j := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "user": "vic", "project": "vision", "name": fmt.Sprintf("v%d", i)})
		vision = append(vision, j.ID)
	}
	borrowed := map[string]bool{}
	waitFor(t, 20*time.Second, func() string { return "6 vision jobs running" }, func() bool {
		n := 0
		for _, id := range vision {
			if s.job(id).State == api.StateRunning {
				n++
			}
		}
		return n == 6
	})
	for _, id := range vision {
		if j := s.job(id); j.Borrowed {
			borrowed[j.ID] = true
		}
	}
	if len(borrowed) != 2 {
		t.Fatalf("%d vision jobs run on borrowed GPUs; want 2 (6 running, quota 4)", len(borrowed))
	}

	var nlp []string
	for i := range 4 {
		j := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "user": "nia", "project": "nlp", "name": fmt.Sprintf("n%d", i)})
		nlp = append(nlp, j.ID)
	}
	for _, id := range nlp {
		s.waitState(id, api.StateRunning, 20*time.Second)
	}
	for _, id := range vision {
		j := s.job(id)
		if !borrowed[id] {
			if j.State != api.StateRunning || j.RetryCount != 0 {
				t.Errorf("vision job %s within quota was disturbed: %s, retry_count %d", j.Name, j.State, j.RetryCount)
			}
			continue
		}
		if j.State != api.StateQueued || j.RetryCount != 1 || j.Preemptions != 1 {
			t.Errorf("borrowed vision job %s: %s, retry_count %d, preemptions %d; want queued, 1, 1", j.Name, j.State, j.RetryCount, j.Preemptions)
		}
		var requeue *api.Event
		for i := range j.Events {
			if e := j.Events[i]; e.To == api.StateQueued && e.From != "" {
				requeue = &j.Events[i]
			}
		}
		if requeue == nil || requeue.Reason != api.ReasonPreempted || !strings.Contains(requeue.Message, "quota") {
			t.Errorf("borrowed vision job %s: requeue event %+v; want reason preempted with a message about the quota", j.Name, requeue)
		}
		if j.PendingReason != "over_quota" {
			t.Errorf("requeued vision job %s pending %q (%s); want over_quota", j.Name, j.PendingReason, j.PendingMessage)
		}
	}
	if c := s.cluster(); c.AllocatedGPUs != 8 {
		t.Errorf("allocated GPUs %d; want 8", c.AllocatedGPUs)
	}
	release(t, dir, "all")
	s.waitAllCompleted(append(vision, nlp...), 30*time.Second)
}

// TestPoliciesPersistAndValidate: bad PUTs answer 422 naming the field and
// change nothing; good ones merge weights and quotas by name and survive
// a restart.
func TestPoliciesPersistAndValidate(t *testing.T) {
	s := startServer(t)
	p0 := s.getPolicies()
	if p0.Policy != "fair_share" || !p0.Backfill || p0.Preemption || !p0.Gang || p0.MinRunTime != 600 || p0.PreemptGrace != 30 {
		t.Errorf("default policies: %+v", p0)
	}
	raw0 := s.do("GET", "/orchestrator/policies", nil, nil).Body

	bad := []struct {
		body  string
		field string
	}{
		{`{"policy": "nope"}`, "policy"},
		{`{"aging_interval": "soon"}`, "aging_interval"},
		{`{"quotas": {"users": {"ana": -1}}}`, "quotas.users"},
		{`{"weights": {"users": {"ana": 0}}}`, "weights.users"},
		{`{"weights": {"projects": {"vision": -2}}}`, "weights.projects"},
		{`{"min_run_time": -5}`, "min_run_time"},
		{`{"half_life": "1s"}`, "half_life"},
		{`{"gang": false}`, "gang"},
		{`{"starve_after": "forever"}`, "starve_after"},
		{`{"starve_share": 0}`, "starve_share"},
		{`{"reserve_after": -1}`, "reserve_after"},
		{`{"tail_factor": -1}`, "tail_factor"},
		{`{"starve_backlog": -0.5}`, "starve_backlog"},
		{`{"starve_light_share": 1.5}`, "starve_light_share"},
		{`{"starve_light_drain": "often"}`, "starve_light_drain"},
		{`{"starve_light_floor": -5}`, "starve_light_floor"},
		{`{"tail_wait": "soon"}`, "tail_wait"},
		// One bad field spoils the whole update.
		{`{"policy": "fcfs", "backfill": false, "quotas": {"projects": {"vision": 2}}, "preempt_grace": "forever"}`, "preempt_grace"},
	}
	for _, c := range bad {
		r := s.do("PUT", "/orchestrator/policies", c.body, nil)
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("PUT %s: want 422, got %s", c.body, r)
			continue
		}
		if e := errorBody(t, r); e.Field != c.field {
			t.Errorf("PUT %s: error field %q, want %q (%s)", c.body, e.Field, c.field, e.Message)
		}
		if now := s.do("GET", "/orchestrator/policies", nil, nil).Body; string(now) != string(raw0) {
			t.Errorf("PUT %s was refused but changed the policies:\nbefore %s\nafter  %s", c.body, raw0, now)
		}
	}

	good := map[string]any{
		"policy": "sjf", "backfill": false, "preemption": true, "spread": true,
		"aging_interval": "2h", "half_life": "72h", "default_estimate": 2700, "min_run_time": 0, "preempt_grace": "5s",
		"starve_after": "96h", "starve_backlog": 2, "starve_light_share": 0.2, "starve_light_drain": "96h", "starve_light_floor": "6h", "oldest_first": true, "tail_factor": 2, "tail_wait": 0,
		"weights": map[string]any{"users": map[string]any{"ana": 2, "bob": 0.5}, "projects": map[string]any{"vision": 3}},
		"quotas":  map[string]any{"users": map[string]any{"ana": 4}, "projects": map[string]any{"vision": 6, "nlp": 2}},
	}
	p := s.setPolicies(good)
	// Merge by name; null deletes.
	p = s.setPolicies(map[string]any{
		"weights": map[string]any{"users": map[string]any{"bob": nil, "cy": 1.5}},
		"quotas":  map[string]any{"projects": map[string]any{"nlp": nil}},
	})
	want := api.Policies{
		Policy: "sjf", Backfill: false, Preemption: true, Gang: true, Spread: true,
		AgingInterval: 7200, HalfLife: 72 * 3600, DefaultEstimate: 2700, MinRunTime: 0, PreemptGrace: 5,
		IdleThreshold: 5, IdleWindow: 1800, IdleAction: "notify", // the defaults
		StarveAfter: 96 * 3600, StarveShare: 1, StarveBacklog: 2, StarveLightShare: 0.2, StarveLightDrain: 96 * 3600, StarveLightFloor: 6 * 3600, OldestFirst: true, ReserveAfter: 7200, TailFactor: 2, TailWait: 0,
		Weights: api.Weights{Users: map[string]float64{"ana": 2, "cy": 1.5}, Projects: map[string]float64{"vision": 3}},
		Quotas:  api.Quotas{Users: map[string]int{"ana": 4}, Projects: map[string]int{"vision": 6}},
		// The interactive classes' idle reclaim defaults (docs/interactive.md).
		Classes: map[string]api.ClassIdle{
			"interactive":             {IdleThreshold: 5, IdleWindow: 3600, IdleWarn: 600},
			"interactive-preemptible": {IdleThreshold: 5, IdleWindow: 3600, IdleWarn: 600},
		},
	}
	check := func(where string, got api.Policies) {
		t.Helper()
		got.Available = nil
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Errorf("%s: policies\n got  %s\n want %s", where, gb, wb)
		}
	}
	check("PUT answer", p)
	check("GET", s.getPolicies())
	var st api.OrchestratorStatus
	s.mustJSON("GET", "/orchestrator/status", nil, http.StatusOK, &st)
	if st.Policy != "sjf" {
		t.Errorf("orchestrator status policy %q, want sjf", st.Policy)
	}

	// Restart on the same data directory.
	s.stop()
	if !s.exited() {
		t.Fatalf("server did not exit on SIGTERM")
	}
	s2 := startServerAt(t, s.DataDir, freePort(t))
	check("after restart", s2.getPolicies())
	s2.mustJSON("GET", "/orchestrator/status", nil, http.StatusOK, &st)
	if st.Policy != "sjf" {
		t.Errorf("orchestrator status policy after restart %q, want sjf", st.Policy)
	}
	// And a bad PUT after the restart still changes nothing.
	if r := s2.do("PUT", "/orchestrator/policies", `{"policy": "nope"}`, nil); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("PUT bad policy after restart: %s", r)
	}
	check("after a refused PUT", s2.getPolicies())
}

// TestSJFRunsShortestFirst: under sjf, jobs that each need the whole
// cluster start in order of estimated_duration, whatever their submission
// order; a job without an estimate, whose user has no history, is ordered
// by the GPU time it attained (Tiresias): none yet, so it goes first.
func TestSJFRunsShortestFirst(t *testing.T) {
	s := startServer(t)
	s.setPolicies(map[string]any{"policy": "sjf", "default_estimate": "2h"})
	var st api.OrchestratorStatus
	s.mustJSON("POST", "/orchestrator/stop", nil, http.StatusOK, &st)
	type spec struct {
		name string
		est  any
	}
	specs := []spec{{"3h", "3h"}, {"none", nil}, {"10m", "10m"}, {"1h", 3600}, {"90m", "1h30m"}}
	want := []string{"none", "10m", "1h", "90m", "3h"}
	var ids []string
	for _, sp := range specs {
		req := map[string]any{"command": "true", "gpu_count": 8, "user": "sid", "name": sp.name}
		if sp.est != nil {
			req["estimated_duration"] = sp.est
		} else {
			// Another user: sid's finished jobs would teach the server
			// an estimate for sid's unestimated job (seconds), by design.
			req["user"] = "nia"
		}
		ids = append(ids, s.submit(req).ID)
	}
	// GET /queue lists them in the order they will run.
	var got []string
	for _, row := range s.queue().QueuedJobs {
		got = append(got, row.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GET /queue order under sjf %v; want %v", got, want)
	}
	s.mustJSON("POST", "/orchestrator/start", nil, http.StatusOK, &st)
	s.waitAllCompleted(ids, 30*time.Second)
	js := make([]api.Job, 0, len(ids))
	for _, id := range ids {
		js = append(js, s.job(id))
	}
	slices.SortFunc(js, func(a, b api.Job) int { return a.StartedAt.Compare(*b.StartedAt) })
	got = got[:0]
	for _, j := range js {
		got = append(got, j.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("start order under sjf %v; want %v", got, want)
	}
}
