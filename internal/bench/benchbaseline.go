package bench

import (
	"context"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// spawnBaseline measures bare fork, exec and wait of /bin/sh -c true, n at
// a time, for about d, and returns how many ended per second: the ceiling
// on job starts that this machine allows at the moment, for bench start to
// print beside its own figure (a same-run baseline, under the same load).
func spawnBaseline(ctx context.Context, n int, d time.Duration) float64 {
	n = max(n, 1)
	var done atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(d)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if exec.Command("/bin/sh", "-c", "true").Run() == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return rate(done.Load(), time.Since(t0))
}
