package api

import "time"

// ExecutorStatus is one executor in GET /orchestrator/status's executors
// list: what runs the jobs of a pool, and, for an engine
// reached over the network (Ray, Slurm), its circuit breaker.
type ExecutorStatus struct {
	Name    string `json:"name"`              // "agents", "ray", "slurm", "k8s"
	Pool    string `json:"pool,omitempty"`    // the pool of its nodes
	Address string `json:"address,omitempty"` // the cluster it drives
	// Breaker is closed, open or half-open; empty: the executor has none.
	Breaker   string     `json:"breaker,omitempty"`
	Failures  int        `json:"failures,omitempty"`   // failed calls in a row
	LastError string     `json:"last_error,omitempty"` // the last one, while it lasts
	Since     *time.Time `json:"since,omitempty"`      // when the breaker entered its state
	RetryAt   *time.Time `json:"retry_at,omitempty"`   // open: when the next probe goes
	Nodes     int        `json:"nodes"`                // alive nodes at its last look (engines only)
}

// The pools of nodes (Node.Pool, SubmitRequest.Pool).
const (
	PoolAgents = "agents" // nodes of corral agents (and corral up's own)
	PoolRay    = "ray"
	PoolSlurm  = "slurm"
	PoolK8s    = "k8s" // a Kubernetes cluster's nodes (--executor k8s)
)
