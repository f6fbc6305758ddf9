package exec

import (
	"strconv"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/breaker"
)

// Health is how an executor stands: for one that talks to a remote
// cluster, its circuit breaker's state (GET /orchestrator/status).
type Health = api.ExecutorStatus

// HealthReporter is an Executor that reports its health.
type HealthReporter interface {
	Health() []Health
}

// BreakerHealth is the health of an executor named name, serving pool,
// that talks to address through a circuit breaker now at s.
func BreakerHealth(name, pool, address string, s breaker.Snapshot) Health {
	h := Health{Name: name, Pool: pool, Address: address, Breaker: string(s.State), Failures: s.Failures, LastError: s.LastErr}
	if !s.Since.IsZero() {
		t := s.Since
		h.Since = &t
	}
	if !s.RetryAt.IsZero() {
		t := s.RetryAt
		h.RetryAt = &t
	}
	return h
}

// SignalName is how an engine's report of a death by signal sig reads:
// "killed" (9), "terminated" (15), "interrupt" (2), else "signal N".
func SignalName(sig int) string {
	switch sig {
	case 9:
		return "killed"
	case 15:
		return "terminated"
	case 2:
		return "interrupt"
	}
	return "signal " + strconv.Itoa(sig)
}
