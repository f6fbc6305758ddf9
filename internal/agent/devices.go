package agent

import (
	"cmp"
	"context"
	"errors"
	osexec "os/exec"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// Devices: a job's cgroup opens only the devices of contain's closed list
// (internal/agent/contain/devices.go): its own GPUs and, on a GPU with
// MIG on, the capabilities of its own MIG devices. A task that names MIG
// devices (TaskSpec.MIGDevices: a slice placed as a unit) gets exactly
// theirs; a task given a whole GPU with MIG on (as before slices were
// placed) gets those of every MIG device of that GPU, never the MIG config
// or monitor capability.

// readNodeDevices reads the node's run-time device majors and the
// driver's MIG capability minors (Config.ProcDevices, MIGMinorsFile),
// once, before the first job starts. What cannot be read leaves the
// rules out: a job then cannot open nvidia-uvm or its MIG slices, and
// says so in its own error; nothing is opened wider.
func (a *Agent) readNodeDevices() {
	procDevices := cmp.Or(a.cfg.ProcDevices, contain.ProcDevices)
	devs, err := contain.ReadNodeDevices(procDevices)
	if err != nil {
		a.log.Warn("could not read the node's device majors: jobs get no nvidia-uvm", "err", err)
	}
	if devs.Nvidia && devs.UVMMajor == 0 {
		// The driver loads nvidia-uvm when a process first uses CUDA
		// (through nvidia-modprobe); a job cannot, and its filter names
		// the major it has now: load it before the first job.
		devs = a.loadUVM(procDevices, devs)
	}
	devs.Extra = a.cfg.AllowDevices
	caps, err := contain.ReadMIGCaps(cmp.Or(a.cfg.MIGMinorsFile, contain.MIGMinorsFile))
	if err != nil {
		a.log.Warn("could not read the driver's MIG capability minors: jobs cannot open MIG devices", "err", err)
	}
	a.tasks.mu.Lock()
	defer a.tasks.mu.Unlock()
	a.tasks.devices, a.tasks.migCaps = devs, caps
}

// loadUVM loads the nvidia-uvm module and makes its device nodes
// (nvidia-modprobe -u -c=0, as the CUDA driver does on first use), then
// reads the majors again; where that fails, jobs cannot use CUDA, and the
// agent says so.
func (a *Agent) loadUVM(procDevices string, devs contain.NodeDevices) contain.NodeDevices {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := osexec.CommandContext(ctx, cmp.Or(a.cfg.NvidiaModprobe, "nvidia-modprobe"), "-u", "-c=0").CombinedOutput()
	again, rerr := contain.ReadNodeDevices(procDevices)
	if err != nil || rerr != nil || again.UVMMajor == 0 {
		a.log.Warn("nvidia-uvm is not loaded and could not be: jobs' CUDA will fail until it is (modprobe nvidia-uvm, then restart the agent)",
			"err", errors.Join(err, rerr), "output", strings.TrimSpace(string(out)))
		return devs
	}
	a.log.Info("loaded nvidia-uvm for the jobs' device filter", "major", again.UVMMajor)
	return again
}

// containSpec is the task's cgroup limits: the job's own, else the node's
// per-GPU defaults times its GPUs; its GPUs' device minors and its MIG
// devices' capability minors.
func (t *tasks) containSpec(s api.TaskSpec) contain.Spec {
	spec := contain.Spec{MemMiB: s.MemMiB, CPUs: s.CPUs, Pids: t.limits.pids, NodePids: t.limits.nodePids}
	if spec.MemMiB == 0 {
		spec.MemMiB = t.limits.memPerGPU * int64(len(s.GPUs))
	}
	if spec.CPUs == 0 {
		spec.CPUs = t.limits.cpusPerGPU * float64(len(s.GPUs))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	spec.Devices = t.devices
	for _, g := range s.GPUs {
		m, ok := t.minors[g]
		if !ok {
			m = g
		}
		spec.GPUMinors = append(spec.GPUMinors, m)
		if spec.Devices.CapsMajor == 0 {
			continue // no nvidia-caps on this node (simulated MIG devices): nothing to open
		}
		for _, d := range t.slicesOf(s, g) {
			caps, err := t.migCaps.SliceMinors(m, d.GPUInstance, d.ComputeInstance)
			if err != nil {
				t.log.Warn("the job cannot open its MIG device: the driver lists no capability for it",
					"job_id", s.JobID, "mig_device", d.UUID, "err", err)
				continue
			}
			spec.CapMinors = append(spec.CapMinors, caps...)
		}
	}
	return spec
}

// slicesOf is the MIG devices of GPU g the task holds: those it names
// (TaskSpec.MIGDevices) where it names any on g, else all of g's (a whole
// GPU with MIG on). Lock held.
func (t *tasks) slicesOf(s api.TaskSpec, g int) []api.MIGDevice {
	all := t.migs[g]
	if len(s.MIGDevices) == 0 {
		return all
	}
	var own []api.MIGDevice
	for _, d := range all {
		for _, u := range s.MIGDevices {
			if d.UUID == u {
				own = append(own, d)
			}
		}
	}
	return own
}

// migOf is the UUIDs of the task's MIG devices (slicesOf, over its GPUs),
// comma-separated, for CORRAL_MIG_DEVICES (and, for a task that names
// its slices, CUDA_VISIBLE_DEVICES); "" when none of its GPUs has MIG on.
// CUDA uses one MIG device per process, the first it sees where the GPU
// itself is visible: a job picks its own by UUID
// (CUDA_VISIBLE_DEVICES=MIG-…), one process per device.
func (t *tasks) migOf(s api.TaskSpec) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var uuids []string
	for _, g := range s.GPUs {
		for _, d := range t.slicesOf(s, g) {
			uuids = append(uuids, d.UUID)
		}
	}
	return strings.Join(uuids, ",")
}
