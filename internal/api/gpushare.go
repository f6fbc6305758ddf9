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

// Equivalents is what the allocation holds in GPU-equivalents: 1, or its
// Fraction for a MIG slice or an MPS share.
func (a Allocation) Equivalents() float64 {
	if a.Fraction > 0 {
		return a.Fraction
	}
	return 1
}

// MIG is a GPU's Multi-Instance GPU state as NVML reports it (or a
// simulated layout: --simulate-gpus 8:H100:80:mig=…). Each MIG device's
// parent GPU is the GPU it is listed under.
type MIG struct {
	// Mode is "enabled" or "disabled": the mode in force.
	Mode string `json:"mode"`
	// PendingMode is the mode after the GPU's next reset, where it differs.
	PendingMode string `json:"pending_mode,omitempty"`
	// Devices are the MIG devices (one compute instance of one GPU
	// instance each) that CUDA sees; empty while the mode is disabled.
	Devices []MIGDevice `json:"devices,omitempty"`
	// ComputeSlices is how many compute slices the whole GPU has (7 on an
	// A100 or H100): a MIG device's share of the GPU is its own
	// ComputeSlices over this. 0: unknown.
	ComputeSlices int `json:"compute_slices,omitempty"`
}

// ShareLimitsMPS: a shared GPU's shares are held to their memory and
// compute by MPS alone (GPU.ShareLimits).
const ShareLimitsMPS = "mps"

// MIG modes.
const (
	MIGEnabled  = "enabled"
	MIGDisabled = "disabled"
)

// MIGDevice is one MIG device of a GPU.
type MIGDevice struct {
	Index           int    `json:"index"`   // within its GPU
	UUID            string `json:"uuid"`    // "MIG-…", what CUDA_VISIBLE_DEVICES takes
	Profile         string `json:"profile"` // e.g. "1g.10gb"; "" when NVML names none
	MemoryTotal     int64  `json:"memory_total"`
	GPUInstance     int    `json:"gpu_instance"`
	ComputeInstance int    `json:"compute_instance"`
	// ComputeSlices is how many of its GPU's compute slices the MIG
	// device has: 3 for a 3g.40gb (and for a 1c.3g.40gb, 1). 0: unknown.
	ComputeSlices int `json:"compute_slices,omitempty"`
	// AllocatedTo is the job or hold the slice is placed with, in GET
	// /cluster/gpu-status (AllocatedNumber its short number); absent when
	// free or as an agent reports it.
	AllocatedTo     string `json:"allocated_to,omitempty"`
	AllocatedNumber string `json:"allocated_number,omitempty"`
}
