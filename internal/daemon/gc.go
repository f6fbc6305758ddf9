package daemon

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// controlGCPercent is the garbage collector's target of `corral up` and
// `corral server` (Go's default is 100). The control plane allocates
// short-lived request, snapshot and store garbage at a high rate beside a
// live heap of every job it holds: at 400 the collector runs a quarter as
// often. bench submit (100,000 held jobs) spent about 17% less server CPU
// with a peak RSS of 416 MB instead of 242 MB (docs/benchmarks.md).
const controlGCPercent = 400

// SetControlGC sets the collector's target to controlGCPercent unless
// GOGC is set in the environment, which wins. corral sim uses it too: a
// replay allocates short-lived snapshots at a high rate and holds little.
func SetControlGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(controlGCPercent)
	}
}

// How the control plane bounds its heap beside GOGC=400: a soft memory
// limit (debug.SetMemoryLimit) of heapHeadroom times the live heap, never
// below heapFloor. While the live heap is small GOGC governs (5 times it
// stays under the floor); once it is large (100,000 queued jobs hold about
// 200 MB) the limit makes the collector run before the heap is five times
// it: 2.5 times, where GOGC=400 let 100,000 queued jobs reach 780-855 MB
// of RSS after a few hundred queries, most of it garbage not yet
// collected.
const (
	heapFloor     = 400 << 20
	heapHeadroom  = 2.5
	heapBoundPoll = time.Second
)

// boundHeap keeps the soft memory limit at heapHeadroom times the live
// heap (and at least heapFloor) until ctx ends, unless GOGC or GOMEMLIMIT
// is set in the environment: they win.
func boundHeap(ctx context.Context, log *slog.Logger) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var set int64
	tick := time.NewTicker(heapBoundPoll)
	defer tick.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			limit := heapLimit(sample[0].Value.Uint64())
			// Move it when it is 10% off: each call costs the runtime a
			// little, and the live heap moves by a few bytes all the time.
			if d := limit - set; d > set/10 || -d > set/10 {
				debug.SetMemoryLimit(limit)
				log.Debug("heap bound", "live_mib", sample[0].Value.Uint64()>>20, "limit_mib", limit>>20)
				set = limit
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// heapLimit is the soft memory limit for a live heap of live bytes.
func heapLimit(live uint64) int64 {
	return max(int64(heapFloor), int64(float64(live)*heapHeadroom))
}
