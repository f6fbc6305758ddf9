package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestKillNineAtRandomInstants kills `corral up` with SIGKILL at
// randomised instants (seeded; the seed is logged, and
// CORRAL_E2E_KILL_SEED replays one) while short jobs are submitted, start
// and end all the time, restarts it on the same data directory, and does
// that killRounds times. Once everything has settled it checks every
// acknowledged job, by job, not by attempt: it is there; it ran exactly
// once (each run appends a line to the job's own marker file), whether it
// had ended, was running, or had not yet started at a kill; it ended with
// its own exit code (0: completed, 3: failed with exit_code 3), never as
// lost; and it used no retry (nothing was lost: an attempt that had not
// started when the server died goes back to the queue without counting
// one). Half the jobs have max_retries 2, so a lost end would show as a
// second run, the other half the default 0, so it would show as a
// failure.
func TestKillNineAtRandomInstants(t *testing.T) {
	const killRounds = 6
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CORRAL_E2E_KILL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CORRAL_E2E_KILL_SEED %q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (CORRAL_E2E_KILL_SEED=%d replays these kill instants)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	s := startServer(t)
	dir := t.TempDir()
	d := shellQuote(dir)

	type want struct {
		code, maxRetries int
	}
	var (
		mu      sync.Mutex
		acked   = map[string]want{}
		stop    atomic.Bool
		wg      sync.WaitGroup
		refused atomic.Int64 // submissions that got no 201 (mostly while no server ran)
	)
	// Four submitters, each with its own sequence of jobs: zero-GPU and
	// one-GPU jobs that exit 0 or 3 after 0, 20 or 150 ms.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				code := []int{0, 3}[(w+n)%2]
				retries := []int{0, 2}[(n/2)%2]
				pause := []string{"0", "0.02", "0.15"}[n%3]
				r, err := s.send("POST", "/queue/submit", map[string]any{
					"command":     fmt.Sprintf(`echo "$CORRAL_ATTEMPT" >> %s/"$CORRAL_JOB_ID".runs; sleep %s; exit %d`, d, pause, code),
					"gpu_count":   n % 2,
					"max_retries": retries,
					"name":        fmt.Sprintf("kr-%d-%d", w, n),
				}, nil)
				var j api.Job
				if err != nil || r.Status != 201 || json.Unmarshal(r.Body, &j) != nil || j.ID == "" {
					refused.Add(1)
					if err != nil {
						time.Sleep(20 * time.Millisecond) // no server: pace the retries until one answers
					}
					continue
				}
				mu.Lock()
				acked[j.ID] = want{code, retries}
				mu.Unlock()
				// Paced: about 160 submissions a second in all keep the
				// server busy at every kill, and the test short (what
				// is submitted must also run and settle).
				time.Sleep(25 * time.Millisecond)
			}
		}()
	}

	began := time.Now()
	cur := s
	for round := range killRounds {
		wait := 300*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
		time.Sleep(wait) // the randomised instant of this kill
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		t.Logf("kill %d: %s after the server answered, %d submissions acknowledged so far", round+1, wait.Round(time.Millisecond), n)
		cur.kill9()
		cur = startServerAt(t, s.DataDir, s.Port)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d kills in %s", killRounds, time.Since(began).Round(100*time.Millisecond))

	// Everything settles.
	mu.Lock()
	jobs := acked
	mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	final := map[string]api.Job{}
	lost := 0
	for id := range jobs {
		for {
			r := cur.do("GET", "/jobs/"+id, nil, nil)
			if r.Status == 404 {
				lost++
				t.Errorf("acknowledged job %s is gone", id)
				break
			}
			var j api.Job
			if r.Status != 200 || json.Unmarshal(r.Body, &j) != nil {
				t.Fatalf("GET /jobs/%s: %s", id, r)
			}
			if j.State.Terminal() || time.Now().After(deadline) {
				final[id] = j
				break
			}
			time.Sleep(50 * time.Millisecond) // poll interval: the job is still queued or running
		}
	}

	var ranTwice, neverRan, misread, retried, unsettled int
	for id, j := range final {
		w := jobs[id]
		b, _ := os.ReadFile(filepath.Join(dir, id+".runs"))
		runs := strings.Count(string(b), "\n")
		if !j.State.Terminal() {
			unsettled++
			t.Errorf("job %s is still %s (%s: %s) 60s after the last restart", id, j.State, j.Reason, j.Message)
			continue
		}
		switch {
		case runs > 1:
			ranTwice++
			t.Errorf("job %s ran %d times (attempts %q); want once: %s", id, runs, strings.Fields(string(b)), eventsText(j))
		case runs == 0:
			neverRan++
			t.Errorf("job %s never ran, and ended %s (%s: %s): %s", id, j.State, j.Reason, j.Message, eventsText(j))
		}
		wantState, wantReason := api.StateCompleted, api.ReasonExited
		if w.code != 0 {
			wantState, wantReason = api.StateFailed, api.ReasonExitCode
		}
		if j.State != wantState || j.Reason != wantReason || j.ExitCode == nil || *j.ExitCode != w.code {
			misread++
			t.Errorf("job %s exits %d but ended %s (%s: %s), exit code %s: %s", id, w.code, j.State, j.Reason, j.Message, exitCodeStr(j.ExitCode), eventsText(j))
		}
		if j.RetryCount != 0 {
			retried++
			t.Errorf("job %s used %d retries (max_retries %d): %s", id, j.RetryCount, w.maxRetries, eventsText(j))
		}
	}
	t.Logf("acknowledged %d, lost %d, ran twice %d, never ran %d, misread (wrong end or exit code) %d, used a retry %d, unsettled %d; %d submissions refused while no server ran",
		len(jobs), lost, ranTwice, neverRan, misread, retried, unsettled, refused.Load())
	cur.waitAllGPUsFree(30 * time.Second)
}

// eventsText is a job's history on one line: "queued>scheduled(reason)...".
func eventsText(j api.Job) string {
	var b strings.Builder
	for i, e := range j.Events {
		if i > 0 {
			b.WriteString(" > ")
		}
		fmt.Fprintf(&b, "%s(%s)", e.To, e.Reason)
	}
	return b.String()
}
