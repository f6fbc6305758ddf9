package sim

import (
	"os"
	"testing"

	"github.com/corral-sched/corral/internal/sched"
)

// phillyTrace is the shared trace, when this checkout sits beside it.
const phillyTrace = "../../../shared/traces/philly-2017-09-10.csv"

func loadPhilly(b *testing.B) []Job {
	b.Helper()
	if _, err := os.Stat(phillyTrace); err != nil {
		b.Skip("the shared Philly trace is not beside this checkout")
	}
	jobs, err := ReadFile(phillyTrace, "", TeamsFromCluster)
	if err != nil {
		b.Fatal(err)
	}
	return jobs
}

// BenchmarkReplayPhilly replays the shared 52,849-job trace on 64 x 8 GPUs
// with backfill, once per policy.
func BenchmarkReplayPhilly(b *testing.B) {
	jobs := loadPhilly(b)
	for _, p := range sched.Policies() {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(jobs, Config{Nodes: 64, NodeGPUs: 8, Policy: sched.Policy{Name: p, Backfill: true}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
