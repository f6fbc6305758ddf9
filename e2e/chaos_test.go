package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Agents are killed with SIGKILL and restarted at random, some within the
// node TTL (their jobs are adopted) and some after it (their jobs are
// fenced and requeued), while jobs come and go. Throughout, the test
// watches the real processes: no job ever has two attempts alive at once,
// and no two live jobs ever use the same GPU of the same node. At the end,
// every acknowledged job has completed.
func TestAgentsChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CORRAL_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (CORRAL_CHAOS_SEED reruns it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))

	s := startCluster(t)
	var agents []*agentProc
	for i := range 3 {
		agents = append(agents, startAgent(t, s, fmt.Sprintf("n%d", i+1), 2))
	}
	dir := t.TempDir()
	d := shellQuote(dir)
	// Each attempt records its shell's pid, node and GPUs, then works.
	cmd := func(secs float64) string {
		return fmt.Sprintf(`echo "$$ $CORRAL_NODE_ID $CUDA_VISIBLE_DEVICES" > %s/$CORRAL_JOB_ID.$CORRAL_ATTEMPT; sleep %.2f`, d, secs)
	}
	var ids []string
	submit := func(n int) {
		for range n {
			j := s.submit(map[string]any{"command": cmd(0.3 + rng.Float64()*1.2), "gpu_count": 1 + rng.IntN(2), "max_retries": 20})
			ids = append(ids, j.ID)
		}
	}

	// The watcher samples the live attempts.
	stop := make(chan struct{})
	var mu sync.Mutex
	var violations []string
	var samples int
	watched := sync.WaitGroup{}
	watched.Add(1)
	go func() {
		defer watched.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // sampling interval
			}
			v := liveAttemptViolations(dir)
			mu.Lock()
			samples++
			violations = append(violations, v...)
			mu.Unlock()
		}
	}()

	submit(20)
	chaosEnd := time.Now().Add(12 * time.Second)
	kills := 0
	for time.Now().Before(chaosEnd) {
		time.Sleep(time.Duration(700+rng.IntN(1200)) * time.Millisecond) // chaos pacing, not synchronisation
		a := agents[rng.IntN(len(agents))]
		a.kill9()
		kills++
		down := time.Duration(rng.IntN(3500)) * time.Millisecond // below or above the 2s TTL
		time.Sleep(down)
		a.start()
		submit(3)
	}
	s.waitAllTerminalTimeout(ids, 90*time.Second)
	close(stop)
	watched.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d jobs, %d agent kills, %d samples of the live processes", len(ids), kills, samples)
	for _, v := range violations[:min(len(violations), 20)] {
		t.Error(v)
	}
	retried := 0
	for _, id := range ids {
		j := s.job(id)
		if j.State != api.StateCompleted {
			t.Errorf("job %s ended %s (reason %q: %s); every job should complete", id, j.State, j.Reason, j.Message)
		}
		if j.RetryCount > 0 {
			retried++
		}
	}
	t.Logf("%d jobs were retried after losing their node", retried)
	s.waitAllFree(10 * time.Second)
}

// waitAllTerminalTimeout polls until every listed job has ended.
func (s *server) waitAllTerminalTimeout(ids []string, timeout time.Duration) {
	s.t.Helper()
	left := len(ids)
	waitFor(s.t, timeout, func() string { return fmt.Sprintf("all %d jobs to end (%d left)", len(ids), left) }, func() bool {
		byID := map[string]api.Job{}
		for _, j := range s.jobs() {
			byID[j.ID] = j
		}
		left = 0
		for _, id := range ids {
			if !byID[id].State.Terminal() {
				left++
			}
		}
		return left == 0
	})
}

// liveAttemptViolations reads the attempt files in dir (JOB.ATTEMPT holding
// "PID NODE GPUS") and reports a job with two live attempts, or two live
// attempts on one GPU.
func liveAttemptViolations(dir string) []string {
	entries, _ := os.ReadDir(dir)
	liveByJob := map[string][]string{}
	gpuHolder := map[string]string{}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue // being written
		}
		pid, _ := strconv.Atoi(f[0])
		if pid <= 0 || processGone(pid) {
			continue
		}
		job, _, _ := strings.Cut(e.Name(), ".")
		liveByJob[job] = append(liveByJob[job], e.Name())
		if len(f) < 3 {
			continue
		}
		for _, g := range strings.Split(f[2], ",") {
			key := f[1] + "/" + g
			if other, ok := gpuHolder[key]; ok {
				out = append(out, fmt.Sprintf("GPU %s used by %s and %s at once", key, other, e.Name()))
			}
			gpuHolder[key] = e.Name()
		}
	}
	for job, attempts := range liveByJob {
		if len(attempts) > 1 {
			out = append(out, fmt.Sprintf("job %s runs twice at once: %v", job, attempts))
		}
	}
	return out
}
