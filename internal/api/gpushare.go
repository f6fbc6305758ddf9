package api

// GPU sharing (docs/cluster.md "Sharing a GPU"): a job may ask for a part
// of one GPU instead of whole GPUs, a MIG slice or an MPS share.

// GPUPart is what a job asks of a part of a GPU, in the job and in its
// submission alike. A job with either asks for gpu_count 1 on one node.
type GPUPart struct {
	// MIGProfile asks for one MIG slice of this profile ("3g.40gb"), or
	// "any": the smallest free slice with at least gpu_memory_gb.
	MIGProfile string `json:"mig_profile,omitempty"`
	// GPUShareMiB asks for an MPS share of a shared GPU with this much of
	// its memory (MiB); GPUCompute for this percent of its compute
	// (1..100; 0: none reserved, the share may use all of it).
	GPUShareMiB int64 `json:"gpu_share_mib,omitempty"`
	GPUCompute  int   `json:"gpu_compute,omitempty"`
}

// Partial reports whether the job asks for a part of a GPU.
func (p GPUPart) Partial() bool { return p.MIGProfile != "" || p.GPUShareMiB > 0 }

// AllocatedSlice is the MIG slice an allocation holds.
type AllocatedSlice struct {
	Index   int    `json:"index"` // within its GPU
	UUID    string `json:"uuid"`  // "MIG-…": the job's CUDA_VISIBLE_DEVICES
	Profile string `json:"profile"`
}

// GPUShareHolder is one MPS share running on a shared GPU, in GET
// /cluster/gpu-status.
type GPUShareHolder struct {
	JobID     string `json:"job_id"`
	Number    string `json:"number,omitempty"`
	User      string `json:"user"`
	MemoryMiB int64  `json:"memory_mib"`
	Compute   int    `json:"compute,omitempty"` // percent; 0: none reserved
}
