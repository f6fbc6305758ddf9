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

// DashboardDelta is the data of a `delta` event of GET /events: what
// changed since the event the same stream sent before it (an `update`, or
// another delta). The stream's first event is an `update`; applying each
// delta in turn to it (DashboardUpdate.Apply) rebuilds the update the
// server would send at that moment. Status, totals, queue statistics,
// arrays and cursor are small, so they come whole every time; the lists
// (queue rows, active jobs, nodes) come as ListDelta.
type DashboardDelta struct {
	At      time.Time          `json:"at"`
	Status  OrchestratorStatus `json:"status"`
	Cluster ClusterDelta       `json:"cluster"`
	Queue   QueueDelta         `json:"queue"`
	Active  ListDelta[Job]     `json:"active"` // by job id
}

// ClusterDelta is the cluster part of a DashboardDelta: the totals, and the
// nodes that changed (each node whole, with its GPUs).
type ClusterDelta struct {
	TotalGPUs     int             `json:"total_gpus"`
	AvailableGPUs int             `json:"available_gpus"`
	AllocatedGPUs int             `json:"allocated_gpus"`
	HeldGPUs      int             `json:"held_gpus"`
	ForeignGPUs   int             `json:"foreign_gpus"`
	Nodes         ListDelta[Node] `json:"nodes"` // by node id
}

// QueueDelta is the queue part of a DashboardDelta. Rows are compared
// without the fields that move with the clock or with other jobs' moves:
// waited_seconds and estimated_wait_time, which the client derives from
// the delta's at, the row's queued_at and estimated_start_time, and
// queue_position, which Positions carries.
type QueueDelta struct {
	Statistics QueueStatistics      `json:"statistics"`
	Arrays     []Array              `json:"arrays,omitempty"`
	NextCursor string               `json:"next_cursor,omitempty"`
	QueuedJobs ListDelta[QueuedJob] `json:"queued_jobs"` // by job id
	// Positions, when set, are the queue_position of each row of the head
	// in order (after QueuedJobs is applied); unset: no position changed.
	Positions []int `json:"positions,omitempty"`
}

// ListDelta is how a list of a DashboardDelta changed, its items keyed by
// id. Applying it: drop the Remove ids; replace each Upsert item whose id
// is listed, append the others in their order; then, when Order is set,
// put the items in that order (Order is sent only when the order is not
// what the first steps give).
type ListDelta[T any] struct {
	Upsert []T      `json:"upsert,omitempty"`
	Remove []string `json:"remove,omitempty"`
	Order  []string `json:"order,omitempty"`
}
