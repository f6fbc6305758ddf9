package readview

import (
	"iter"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Statistics is GET /queue/statistics over copied books: queued jobs
// counted, and the jobs that may have started (started; queuedAt says
// when each last joined the queue). Waits are those of jobs that started
// in the 24 hours before now (start minus last queueing); throughput is
// starts in the last hour. Called under the orchestrator's read lock.
func Statistics(queued int, started iter.Seq[*api.Job], queuedAt func(*api.Job) time.Time, now time.Time) api.QueueStatistics {
	s := api.QueueStatistics{TotalQueued: queued}
	var waits []float64
	dayAgo, hourAgo := now.Add(-24*time.Hour), now.Add(-time.Hour)
	for j := range started {
		if j.State == api.StateRunning {
			s.TotalRunning++
		}
		if j.FinishedAt != nil && j.FinishedAt.After(hourAgo) && j.State == api.StateCompleted {
			s.CompletedLastHour++
		}
		if j.StartedAt == nil || j.StartedAt.Before(dayAgo) {
			continue
		}
		waits = append(waits, j.StartedAt.Sub(queuedAt(j)).Seconds())
		if j.StartedAt.After(hourAgo) {
			s.QueueThroughput++
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		sum := 0.0
		for _, w := range waits {
			sum += w
		}
		s.AverageWaitTime = sum / float64(len(waits))
		s.WaitTimeP50, s.WaitTimeP95, s.WaitTimeP99 = Percentile(waits, 50), Percentile(waits, 95), Percentile(waits, 99)
	}
	return s
}
