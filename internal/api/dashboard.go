package api

import "time"

// History is GET /history: the cluster over time, from samples the server
// keeps (the last 24 hours at least), averaged into steps so that a graph
// gets about as many points as it asked for.
type History struct {
	Since    time.Time      `json:"since"`
	Until    time.Time      `json:"until"`
	Step     Seconds        `json:"step"`     // the width of one point
	Interval Seconds        `json:"interval"` // how often the server samples
	Points   []HistoryPoint `json:"points"`   // oldest first; steps without samples are left out
}

// HistoryPoint is the cluster during one step. Gauges (GPUs, utilization,
// queue) are averages over the step's samples; counts (started, completed,
// failed) are totals over the step.
type HistoryPoint struct {
	At             time.Time   `json:"at"` // the end of the step
	TotalGPUs      float64     `json:"total_gpus"`
	AllocatedGPUs  float64     `json:"allocated_gpus"` // held GPUs included
	HeldGPUs       float64     `json:"held_gpus"`
	ForeignGPUs    float64     `json:"foreign_gpus"`
	DownGPUs       float64     `json:"down_gpus"`
	Utilization    float64     `json:"utilization"` // mean percent over all GPUs
	MemoryUsedMiB  float64     `json:"memory_used_mib"`
	MemoryTotalMiB float64     `json:"memory_total_mib"`
	Queued         float64     `json:"queued"`
	Running        float64     `json:"running"` // jobs holding GPUs
	Started        int         `json:"started"`
	Completed      int         `json:"completed"`
	Failed         int         `json:"failed"` // failed or canceled
	StartsPerHour  float64     `json:"starts_per_hour"`
	WaitMean       *float64    `json:"wait_mean"` // seconds, of the jobs started in the step; null without starts
	WaitMax        *float64    `json:"wait_max"`
	Nodes          []NodePoint `json:"nodes,omitempty"` // with ?node=ID or ?node=all
}

// NodePoint is one node during one step of a History.
type NodePoint struct {
	NodeID        string  `json:"node_id"`
	GPUs          float64 `json:"gpus"`
	AllocatedGPUs float64 `json:"allocated_gpus"`
	Utilization   float64 `json:"utilization"` // mean percent over the node's GPUs
	MemoryUsedMiB float64 `json:"memory_used_mib"`
	Down          bool    `json:"down,omitempty"` // down at the step's last sample
}

// DashboardUpdate is the data of one `update` event of GET /events: all
// the dashboard shows, sent when something changed (and at least every few
// seconds, for telemetry).
type DashboardUpdate struct {
	At      time.Time          `json:"at"`
	Status  OrchestratorStatus `json:"status"`
	Cluster ClusterStatus      `json:"cluster"`
	Queue   QueueResponse      `json:"queue"`
	Active  []Job              `json:"active"` // jobs holding GPUs (scheduled, allocating, running), oldest first
}
