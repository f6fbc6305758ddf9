package deps

import (
	"fmt"
	"testing"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
)

// BenchmarkEligible: the dependency pass alone, over the fake books, on
// 10,000 queued jobs: each afterok on the one before it (chain: all held
// back), on one completed job (met: all go), or on a completed 100-task
// array in memory (array: all go, the array's verdict computed once).
// The orchestrator's BenchmarkDependencyPass measures the same pass over
// its own books.
func BenchmarkEligible(b *testing.B) {
	for _, mode := range []string{"chain", "met", "array"} {
		b.Run("deps="+mode, func(b *testing.B) {
			f := newFake()
			tr := f.tracker(0)
			f.add("jrun", api.StateRunning, "")
			f.add("jdone", api.StateCompleted, "")
			for i := range 100 {
				f.task("jarr", i, api.StateCompleted)
			}
			prev := "jrun"
			for i := range 10000 {
				id := fmt.Sprintf("jq%06d", i)
				switch mode {
				case "chain":
					f.add(id, api.StateQueued, "afterok:"+prev)
				case "met":
					f.add(id, api.StateQueued, "afterok:jdone")
				case "array":
					f.add(id, api.StateQueued, "afterok:jarr")
				}
				prev = id
			}
			queue, tx := f.queue(), &featuretest.Tx{At: t0}
			tr.Eligible(tx, queue) // expressions parsed
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tr.Eligible(tx, queue)
			}
		})
	}
}
