package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// BenchmarkAppendAuditParallel: one audit entry per call from many
// goroutines, the way the API records each submission.
func BenchmarkAppendAuditParallel(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			e := api.AuditEntry{At: time.Now(), User: "ana", Role: api.RoleUser, Action: "job.submit", Method: "POST",
				Path: "/queue/submit", Target: fmt.Sprintf("j%d", i), Status: 201, RequestID: "0123456789abcdef"}
			if err := s.AppendAudit(ctx, e); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "entries/s")
}
