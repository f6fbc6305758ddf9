package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// partFlags are the flags of submit, run, notebook and alloc that ask
// for a part of one GPU instead of whole GPUs (docs/cluster.md "Sharing
// a GPU").
type partFlags struct {
	mig     string // --mig PROFILE|any
	share   string // --gpu-share 20G
	compute int    // --gpu-compute 25
}

func (p *partFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&p.mig, "mig", "", "run on one MIG slice of this profile instead of a whole GPU, e.g. 1g.10gb or 3g.40gb; any: the smallest free slice with at least --gpu-mem")
	fl.StringVar(&p.share, "gpu-share", "", "run as an MPS share of a shared GPU with this much of its memory, e.g. 20G or 512M (its limit: past it the job's allocations fail)")
	fl.IntVar(&p.compute, "gpu-compute", 0, "with --gpu-share: this percent of the GPU's compute, 1-100 (default: none reserved, up to all of it)")
}

// apply puts the part asked for into the request (a job's or a hold's).
func (p *partFlags) apply(req *api.GPUPart) error {
	req.MIGProfile = p.mig
	req.GPUCompute = p.compute
	if p.share == "" {
		if p.compute != 0 {
			return usagef("--gpu-compute needs --gpu-share: it is a share's part of its GPU's compute")
		}
		return nil
	}
	mib, err := parseMemMiB(p.share)
	if err != nil {
		return usagef("--gpu-share: %v", err)
	}
	if mib <= 0 {
		return usagef("--gpu-share must be more than 0")
	}
	req.GPUShareMiB = mib
	return nil
}

// fmtPart says what part of a GPU a job asks for ("" for whole GPUs):
// "MIG slice 3g.40gb", "MPS share of 20G, 25% of the compute".
func fmtPart(p api.GPUPart) string {
	switch {
	case p.MIGProfile != "":
		return "MIG slice " + p.MIGProfile
	case p.GPUShareMiB > 0:
		s := "MPS share of " + fmtMiB(p.GPUShareMiB)
		if p.GPUCompute > 0 {
			s += fmt.Sprintf(", %d%% of the compute", p.GPUCompute)
		}
		return s
	}
	return ""
}

// simMIGLayout reads corral sim --mig (the layout --simulate-gpus takes
// after mig=) for nodes of gpus 80 GB GPUs: each GPU's slices, as the
// simulator places them; nil without a layout.
func simMIGLayout(layout string, gpus int) (map[int][]sched.Slice, error) {
	if layout == "" {
		return nil, nil
	}
	ms, err := gpu.SimMIGLayout(layout, gpus, 80*1024)
	if err != nil {
		return nil, usagef("--mig: %v", err)
	}
	out := make(map[int][]sched.Slice, len(ms))
	for g, m := range ms {
		for _, d := range m.Devices {
			out[g] = append(out[g], sched.Slice{Index: d.Index, Profile: d.Profile, MemoryMiB: d.MemoryTotal, ComputeSlices: d.ComputeSlices})
		}
	}
	return out, nil
}
