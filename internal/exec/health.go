package exec

import "time"

// Health is how an executor that talks to a remote cluster stands: its
// circuit breaker's state, for GET /orchestrator/status and the dashboard.
type Health struct {
	Name    string `json:"name"`              // "agents", "ray", "slurm"
	Pool    string `json:"pool,omitempty"`    // the pool of its nodes
	Address string `json:"address,omitempty"` // the cluster it drives
	// Breaker is closed, open or half-open; empty: the executor has none.
	Breaker   string     `json:"breaker,omitempty"`
	Failures  int        `json:"failures,omitempty"`   // failed calls in a row
	LastError string     `json:"last_error,omitempty"` // the last one
	Since     *time.Time `json:"since,omitempty"`      // when the breaker entered its state
	RetryAt   *time.Time `json:"retry_at,omitempty"`   // open: when the next probe goes
	Nodes     int        `json:"nodes"`                // alive nodes at its last look
}

// HealthReporter is an Executor that reports its health.
type HealthReporter interface {
	Health() []Health
}
