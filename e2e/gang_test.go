package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestConcurrentGangsNeverShareGPUs submits 200 jobs of 1-8 GPUs from 32
// goroutines at once on 8 simulated GPUs. Each job records its own
// CUDA_VISIBLE_DEVICES and when it ran. No two jobs may ever hold one GPU at
// the same time: checked from the allocations the server recorded, and from
// what the jobs themselves saw.
func TestConcurrentGangsNeverShareGPUs(t *testing.T) {
	const (
		jobs    = 200
		workers = 32
	)
	s := startServer(t)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	type spec struct {
		gpus  int
		sleep int // hundredths of a second
	}
	specs := make([]spec, jobs)
	for i := range specs {
		specs[i] = spec{gpus: 1 + rng.IntN(8), sleep: 1 + rng.IntN(4)}
	}

	d := shellQuote(dir)
	var (
		mu     sync.Mutex
		wanted = map[string]int{} // job id -> gpu_count asked
		errs   []string
		wg     sync.WaitGroup
		next   = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cmd := fmt.Sprintf(`echo "$CORRAL_JOB_ID $CUDA_VISIBLE_DEVICES $(date +%%s%%N)" > %s/$CORRAL_JOB_ID.start; sleep 0.0%d; date +%%s%%N > %s/$CORRAL_JOB_ID.end`,
					d, specs[i].sleep, d)
				r, err := s.send("POST", "/queue/submit", map[string]any{
					"command": cmd, "gpu_count": specs[i].gpus, "name": "gang-" + strconv.Itoa(i),
					"user": "user" + strconv.Itoa(i%5), "priority": 1 + i%4,
				}, nil)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, fmt.Sprintf("submit %d: %v", i, err))
				case r.Status != 201:
					errs = append(errs, fmt.Sprintf("submit %d: %s", i, r))
				default:
					var j api.Job
					if err := json.Unmarshal(r.Body, &j); err != nil || j.ID == "" {
						errs = append(errs, fmt.Sprintf("submit %d: bad answer %v %s", i, err, truncate(string(r.Body), 200)))
					} else if _, dup := wanted[j.ID]; dup {
						errs = append(errs, fmt.Sprintf("submit %d: id %s given twice", i, j.ID))
					} else {
						wanted[j.ID] = specs[i].gpus
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d submissions failed, e.g.:\n%s", len(errs), jobs, strings.Join(errs[:min(len(errs), 10)], "\n"))
	}

	// Wait until all 200 are completed.
	var all []api.Job
	waitFor(t, 120*time.Second, func() string {
		counts := map[api.State]int{}
		for _, j := range all {
			counts[j.State]++
		}
		return fmt.Sprintf("all %d jobs to complete (states now %v)", jobs, counts)
	}, func() bool {
		all = s.jobs()
		done := 0
		for _, j := range all {
			if j.State.Terminal() {
				if j.State != api.StateCompleted {
					t.Fatalf("job %s ended %s (%s: %s); log %q", j.ID, j.State, j.Reason, j.Message, s.logs(j.ID))
				}
				done++
			}
		}
		return done == jobs
	})
	if len(all) != jobs {
		t.Fatalf("GET /jobs lists %d jobs, want %d", len(all), jobs)
	}

	// (a) The server's books: each job got exactly gpu_count distinct GPUs
	// on one node, and no GPU had two jobs at once.
	booked := map[string][]span{} // "node/gpu" -> intervals
	var spans []span
	for _, j := range all {
		want, ok := wanted[j.ID]
		if !ok {
			t.Errorf("job %s was never acknowledged", j.ID)
			continue
		}
		if j.GPUCount != want || len(j.Allocation) != want {
			t.Errorf("job %s asked %d GPUs: gpu_count %d, allocation %d", j.ID, want, j.GPUCount, len(j.Allocation))
			continue
		}
		gpus := gpuSet(j.Allocation)
		if len(slices.Compact(slices.Clone(gpus))) != len(gpus) {
			t.Errorf("job %s got one GPU twice: %v", j.ID, gpus)
		}
		for _, a := range j.Allocation {
			if a.NodeID != j.Allocation[0].NodeID {
				t.Errorf("job %s (a gang) spans nodes %s and %s", j.ID, j.Allocation[0].NodeID, a.NodeID)
			}
			if a.GPUID < 0 || a.GPUID > 7 {
				t.Errorf("job %s got GPU %d of 8", j.ID, a.GPUID)
			}
		}
		if j.StartedAt == nil || j.FinishedAt == nil || j.FinishedAt.Before(*j.StartedAt) {
			t.Errorf("job %s: started_at %v, finished_at %v", j.ID, j.StartedAt, j.FinishedAt)
			continue
		}
		iv := span{j.ID, j.StartedAt.UnixNano(), j.FinishedAt.UnixNano()}
		spans = append(spans, iv)
		for _, a := range j.Allocation {
			k := a.NodeID + "/" + strconv.Itoa(a.GPUID)
			booked[k] = append(booked[k], iv)
		}
	}
	checkDisjoint(t, "recorded [started_at, finished_at]", booked)
	t.Logf("at most %d jobs ran at once (server's times)", maxConcurrent(spans))
	if maxConcurrent(spans) < 2 {
		t.Errorf("no two jobs ever ran at once: the test proved nothing about sharing")
	}

	// (b) The jobs' own view: CUDA_VISIBLE_DEVICES matches the allocation,
	// and their process lifetimes never overlap on a GPU.
	seen := map[string][]span{}
	var procSpans []span
	for _, j := range all {
		startB, err1 := os.ReadFile(filepath.Join(dir, j.ID+".start"))
		endB, err2 := os.ReadFile(filepath.Join(dir, j.ID+".end"))
		if err1 != nil || err2 != nil {
			t.Errorf("job %s left no record: %v %v", j.ID, err1, err2)
			continue
		}
		f := strings.Fields(string(startB))
		if len(f) != 3 {
			t.Errorf("job %s start record %q: want ID GPUS TIME", j.ID, startB)
			continue
		}
		if f[0] != j.ID {
			t.Errorf("job %s saw CORRAL_JOB_ID %q", j.ID, f[0])
		}
		visible, err := parseGPUList(f[1])
		if err != nil {
			t.Errorf("job %s: %v", j.ID, err)
			continue
		}
		if got := gpuSet(j.Allocation); !slices.Equal(visible, got) {
			t.Errorf("job %s saw CUDA_VISIBLE_DEVICES=%s, but its allocation is %v", j.ID, f[1], got)
		}
		start, err1 := strconv.ParseInt(f[2], 10, 64)
		end, err2 := strconv.ParseInt(strings.TrimSpace(string(endB)), 10, 64)
		if err1 != nil || err2 != nil || end < start {
			t.Errorf("job %s recorded times %q .. %q", j.ID, f[2], endB)
			continue
		}
		iv := span{j.ID, start, end}
		procSpans = append(procSpans, iv)
		for _, g := range visible {
			k := j.Allocation[0].NodeID + "/" + strconv.Itoa(g)
			seen[k] = append(seen[k], iv)
		}
	}
	checkDisjoint(t, "the jobs' own start..end", seen)
	t.Logf("at most %d jobs ran at once (jobs' own times)", maxConcurrent(procSpans))

	s.waitAllGPUsFree(10 * time.Second)
}

// span is a job's time on its GPUs, in unix nanoseconds.
type span struct {
	job        string
	start, end int64
}

// checkDisjoint fails the test when two spans on one GPU overlap.
func checkDisjoint(t *testing.T, what string, byGPU map[string][]span) {
	t.Helper()
	bad := 0
	for gpu, list := range byGPU {
		list = slices.Clone(list)
		sort.Slice(list, func(a, b int) bool { return list[a].start < list[b].start })
		for i := 1; i < len(list); i++ {
			prev, cur := list[i-1], list[i]
			if cur.start < prev.end {
				bad++
				if bad <= 10 {
					t.Errorf("GPU %s was shared (%s): job %s [%d, %d] overlaps job %s [%d, %d] by %v",
						gpu, what, prev.job, prev.start, prev.end, cur.job, cur.start, cur.end, time.Duration(prev.end-cur.start))
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d overlaps in all (%s)", bad, what)
	}
}

// maxConcurrent is the largest number of spans open at one instant.
func maxConcurrent(spans []span) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, x := range spans {
		edges = append(edges, edge{x.start, 1}, edge{x.end, -1})
	}
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].at != edges[b].at {
			return edges[a].at < edges[b].at
		}
		return edges[a].delta < edges[b].delta // an end before a start at the same instant
	})
	n, best := 0, 0
	for _, e := range edges {
		n += e.delta
		best = max(best, n)
	}
	return best
}
