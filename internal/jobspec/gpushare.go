package jobspec

import (
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
)

// migProfile is what a MIG profile looks like: "1g.10gb", "3g.40gb",
// "1c.3g.40gb", "1g.10gb+me".
var migProfile = lazyre.New(`^([0-9]+c\.)?[0-9]+g\.[0-9]+gb(\+[a-z]+)?$`)

// validateGPUPart checks a request for a part of one GPU (mig_profile,
// gpu_share_mib, gpu_compute): a MIG slice or an MPS share, not both, on
// exactly one GPU of one node (so never elastic), never in a booking.
func validateGPUPart(req *api.SubmitRequest, j *api.Job) error {
	p := req.GPUPart
	if err := CheckGPUPart(&p, j.GPUCount, j.Nodes); err != nil {
		return err
	}
	if p.Partial() && req.Reservation != "" {
		return api.Invalid("reservation", "a booking holds whole GPUs; a MIG slice or an MPS share does not run in one")
	}
	j.GPUPart = p
	return nil
}

// CheckGPUPart checks a part of one GPU asked of gpus GPUs on nodes nodes
// (a job's or a hold's): a valid MIG profile or "any", or an MPS share
// with an optional compute percent, not both, and then exactly 1 GPU on
// 1 node. It normalises the profile (lower case, trimmed). The error
// names the field (422).
func CheckGPUPart(p *api.GPUPart, gpus, nodes int) error {
	p.MIGProfile = strings.ToLower(strings.TrimSpace(p.MIGProfile))
	switch {
	case p.MIGProfile != "" && p.MIGProfile != "any" && !migProfile.MatchString(p.MIGProfile):
		return api.Invalid("mig_profile", "%q is not a MIG profile (such as 1g.10gb or 3g.40gb) or \"any\"", truncate(p.MIGProfile, 40))
	case p.GPUShareMiB < 0 || p.GPUShareMiB > maxMemMiB:
		return api.Invalid("gpu_share_mib", "must be between 1 and %d MiB, not %d", maxMemMiB, p.GPUShareMiB)
	case p.GPUCompute != 0 && p.GPUShareMiB == 0:
		return api.Invalid("gpu_compute", "needs gpu_share_mib: it is a share's percent of its GPU's compute")
	case p.GPUCompute < 0 || p.GPUCompute > 100:
		return api.Invalid("gpu_compute", "must be between 1 and 100 (percent), not %d", p.GPUCompute)
	case p.MIGProfile != "" && p.GPUShareMiB > 0:
		return api.Invalid("gpu_share_mib", "a job takes a MIG slice (mig_profile) or an MPS share (gpu_share_mib), not both")
	case !p.Partial():
		return nil
	case gpus != 1:
		return api.Invalid("gpu_count", "a MIG slice or an MPS share is a part of exactly 1 GPU, not %d", gpus)
	case nodes != 1:
		return api.Invalid("nodes", "a MIG slice or an MPS share runs on 1 node, not %d", nodes)
	}
	return nil
}
