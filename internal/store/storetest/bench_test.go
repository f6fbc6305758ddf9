package storetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/storetest"
)

// BenchmarkCommitParallel commits one submission per call (a job row, its
// event, its idempotency key and its audit entry) from many goroutines,
// as the API does, on each database: the group commit's throughput.
func BenchmarkCommitParallel(b *testing.B) {
	ctx := context.Background()
	for _, db := range []struct {
		name string
		open func(b *testing.B) (*store.Store, error)
	}{
		{"sqlite", func(b *testing.B) (*store.Store, error) {
			return store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
		}},
		{"postgres", func(b *testing.B) (*store.Store, error) { return store.OpenPostgres(ctx, storetest.Postgres(b)) }},
	} {
		b.Run(db.name, func(b *testing.B) {
			s, err := db.open(b)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("j%09d", n.Add(1))
					err := s.Commit(ctx, &store.Batch{
						Jobs:        []api.Job{{ID: id, User: "ana", State: api.StateQueued, Priority: api.PriorityNormal, SubmittedAt: at}},
						Events:      []store.JobEvent{{JobID: id, Event: api.Event{At: at, To: api.StateQueued}}},
						Idempotency: map[string]string{"k" + id: id},
						Audit:       []api.AuditEntry{{At: at, User: "ana", Action: "job.submit"}},
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
