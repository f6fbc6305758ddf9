package api

import "time"

// LoadProfile is the answer of GET /advise: the cluster's recorded load
// over a period, as `corral advise` compares it with cloud instances
// (docs/advise.md).
type LoadProfile struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	Jobs  int       `json:"jobs"` // jobs that held GPUs in the period
	// GPUHours is the GPU time used in the period (clipped to it).
	GPUHours float64 `json:"gpu_hours"`
	// PeakGPUs is the most GPUs held at once; TypicalGPUs and P90GPUs the
	// median and 90th percentile of GPUs held, weighted by time over the
	// whole period (idle time counts as 0).
	PeakGPUs    int     `json:"peak_gpus"`
	TypicalGPUs float64 `json:"typical_gpus"`
	P90GPUs     float64 `json:"p90_gpus"`
	// MaxJobGPUs is the most GPUs one job held on one node.
	MaxJobGPUs int `json:"max_job_gpus"`
	// Shapes groups the GPU-hours by GPUs per node and GPU memory per GPU
	// (asked by the job; 0: the job named none).
	Shapes []LoadShape `json:"shapes"`
	// ClusterGPUs counts the cluster's GPUs by model now.
	ClusterGPUs map[string]int `json:"cluster_gpus"`
}

// LoadShape is the share of a LoadProfile of jobs of one shape.
type LoadShape struct {
	GPUs        int     `json:"gpus"`          // per node
	GPUMemoryGB float64 `json:"gpu_memory_gb"` // per GPU; 0: not asked
	Jobs        int     `json:"jobs"`
	GPUHours    float64 `json:"gpu_hours"`
}
