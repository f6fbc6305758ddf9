package exec

import "github.com/corral-sched/corral/internal/api"

// Health is how an executor stands: for one that talks to a remote
// cluster, its circuit breaker's state (GET /orchestrator/status).
type Health = api.ExecutorStatus

// HealthReporter is an Executor that reports its health.
type HealthReporter interface {
	Health() []Health
}
