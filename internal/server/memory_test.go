package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// TestMemoryUnderAdversarialLoad is an adversarial test's memory attack, measured
// (CORRAL_MEMORY_BENCH=1; docs/benchmarks.md, "Memory under adversarial
// load"): one user submits 400 jobs of about 1 MB (command and env), then
// jobs at the size limits until refused, and three listings of every job
// run at once, following their cursors. It prints the Go heap (the whole
// test process: server, store and client) at each step.
func TestMemoryUnderAdversarialLoad(t *testing.T) {
	if os.Getenv("CORRAL_MEMORY_BENCH") == "" {
		t.Skip("a measurement: CORRAL_MEMORY_BENCH=1 runs it")
	}
	e := newAuthEnv(t)
	mb := func(n uint64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
	heap := func() runtime.MemStats {
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m
	}
	report := func(step string, m runtime.MemStats) {
		fmt.Printf("%-44s heap in use %8s   heap held from the OS %8s\n", step, mb(m.HeapAlloc), mb(m.HeapSys-m.HeapReleased))
	}
	report("baseline", heap())

	job := func(cmd int, vals int, val int) string {
		env := map[string]string{}
		for i := range vals {
			env["E"+strconv.Itoa(i)] = strings.Repeat("v", val)
		}
		b, _ := json.Marshal(map[string]any{"command": strings.Repeat("c", cmd), "env": env, "gpu_count": 1})
		return string(b)
	}
	submit := func(body string, n int) map[int]int {
		codes := map[int]int{}
		for range n {
			resp, _ := e.do("owner", "POST", "/queue/submit", body, nil)
			codes[resp.StatusCode]++
		}
		return codes
	}
	oneMB := job(60_000, 29, 32_000)
	fmt.Printf("400 jobs of %d bytes: answers %v\n", len(oneMB), submit(oneMB, 400))
	report("after 400 jobs of 1 MB", heap())
	atLimits, n := job(64<<10, 8, 32_000), 400
	if v := os.Getenv("CORRAL_MEMORY_BENCH_LIMIT_JOBS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	fmt.Printf("%d jobs of %d bytes (the limits): answers %v\n", n, len(atLimits), submit(atLimits, n))
	report("after 400 jobs at the limits", heap())

	// Three full listings at once, sampling the heap every 10 ms.
	stop := make(chan struct{})
	var peak uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	start := time.Now()
	for l := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs, size, pages := listAllJobs(t, e.url, e.tokens["owner"])
			fmt.Printf("listing %d: %d jobs, %s of JSON in %d pages, %.1f s\n", l, jobs, mb(uint64(size)), pages, time.Since(start).Seconds())
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	fmt.Printf("%-44s heap in use %8s\n", "peak during three listings", mb(peak))
	report("after the listings", heap())

	for {
		queued := e.o.Jobs(orchestrator.JobFilter{State: api.StateQueued})
		if len(queued) == 0 {
			break
		}
		for _, j := range queued {
			e.o.Cancel(context.Background(), j.ID, 0)
		}
	}
	// Scheduling on (the test ran with it off, so that jobs stayed
	// queued): a cycle drops the canceled jobs from the queue's books.
	ch := e.o.Changed()
	e.o.SetScheduling(context.Background(), true)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
	}
	e.o.Queue() // the cached view of the queue is recomputed, now empty
	report("after every job was canceled", heap())
}

// listAllJobs reads GET /jobs page by page to the end as token's holder, without
// keeping the pages: jobs listed, bytes read, pages.
func listAllJobs(t *testing.T, url, token string) (jobs int, size int64, pages int) {
	cursorRe := regexp.MustCompile(`"next_cursor": "([^"]+)"`)
	cursor := ""
	for {
		req, _ := http.NewRequest("GET", url+"/jobs?limit=1000&cursor="+cursor, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		r := bufio.NewReaderSize(resp.Body, 64<<10)
		tail := ""
		for {
			line, err := r.ReadSlice('\n')
			size += int64(len(line))
			s := string(line)
			if strings.HasPrefix(s, "    {") {
				jobs++
			}
			if strings.Contains(s, `"next_cursor"`) {
				tail = s
			}
			if err == io.EOF {
				break
			}
			if err != nil && err != bufio.ErrBufferFull {
				t.Error(err)
				break
			}
		}
		resp.Body.Close()
		pages++
		m := cursorRe.FindStringSubmatch(tail)
		if m == nil {
			return
		}
		cursor = m[1]
	}
}
