package api

import "time"

// WhatIf is GET /jobs/{id}/what-if?gpus=N: when a queued job would start
// with N GPUs per node instead of its own count, planned on a copy of the
// scheduler's snapshot; nothing is submitted or changed.
type WhatIf struct {
	JobID       string `json:"job_id"`
	GPUs        int    `json:"gpus"`         // GPUs per node asked about
	CurrentGPUs int    `json:"current_gpus"` // the job's own gpu_count
	Nodes       int    `json:"nodes"`
	// StartsNow: with GPUs it would start in the next cycle.
	StartsNow bool `json:"starts_now"`
	// The estimated start with its range, as Job's; null when unknown
	// (held, or never on this cluster).
	EstimatedStartTime *time.Time `json:"estimated_start_time"`
	EstimatedStartLow  *time.Time `json:"estimated_start_low"`
	EstimatedStartHigh *time.Time `json:"estimated_start_high"`
	EstimateBasis      string     `json:"estimate_basis,omitempty"`
	// Why it would wait, when it would (as Job's pending fields).
	PendingReason  string `json:"pending_reason,omitempty"`
	PendingMessage string `json:"pending_message,omitempty"`
}
