package contain

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Under cgroup v2 a cgroup's device rules are an eBPF program of type
// BPF_PROG_TYPE_CGROUP_DEVICE attached to it. The library (runc's) builds
// one from a v1-style rule list through its v1 emulator, a block of
// instructions per rule, and building, loading and verifying the 1,300
// instructions of the earlier open filter took about 6 ms per attempt,
// more than all the rest of a start (measured on an H100 machine's kernel
// 6.18). deviceFilter states the closed list (jobRules) in two
// instructions a rule, some 50 for a job.

// deviceFilter returns the program of an attempt's device rules: mknod of
// any device (which opens nothing), and read and write of jobRules' closed
// list of character devices; everything else, block devices included, is
// denied (EPERM).
func deviceFilter(spec Spec) asm.Instructions {
	const allow, deny = "allow", "deny"
	insns := asm.Instructions{
		// struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }
		// access_type is (access << 16) | type.
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word),
		asm.Mov.Reg(asm.R5, asm.R2),
		asm.RSh.Imm(asm.R5, 16),
		asm.JEq.Imm(asm.R5, unix.BPF_DEVCG_ACC_MKNOD, allow), // mknod alone
		asm.And.Imm(asm.R2, 0xffff),
		asm.JNE.Imm(asm.R2, unix.BPF_DEVCG_DEV_CHAR, deny),
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word),
		asm.LoadMem(asm.R4, asm.R1, 8, asm.Word),
	}
	rules := jobRules(spec, false)
	for i, d := range rules {
		next := deny
		if i+1 < len(rules) {
			next = fmt.Sprintf("rule%d", i+1)
		}
		skip := asm.JNE.Imm(asm.R3, int32(d.Major), next)
		if i > 0 {
			skip = skip.WithSymbol(fmt.Sprintf("rule%d", i))
		}
		insns = append(insns, skip)
		if d.Minor == anyMinor {
			insns = append(insns, asm.Ja.Label(allow))
		} else {
			insns = append(insns, asm.JEq.Imm(asm.R4, int32(d.Minor), allow))
		}
	}
	return append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol(deny), // EPERM
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol(allow),
		asm.Return(),
	)
}

// attachDeviceFilter gives the v2 cgroup at dir the device rules of an
// attempt of spec, in place of any device programs it
// has (a cgroup taken over from an earlier agent): the new program is
// attached before the old ones are detached, so the cgroup is never
// without rules.
func attachDeviceFilter(dir string, spec Spec) error {
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("device filter: %w", err)
	}
	defer unix.Close(fd)
	var old []ebpf.ProgramID
	if q, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: ebpf.AttachCGroupDevice}); err == nil {
		for _, p := range q.Programs {
			old = append(old, p.ID)
		}
	}
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:         ebpf.CGroupDevice,
		Instructions: deviceFilter(spec),
		License:      "Apache",
	}, ebpf.ProgramOptions{})
	if err != nil {
		return fmt.Errorf("device filter: load: %w", err)
	}
	defer prog.Close() // attached, the kernel keeps it
	if err := link.RawAttachProgram(link.RawAttachProgramOptions{
		Target: fd, Program: prog, Attach: ebpf.AttachCGroupDevice, Flags: unix.BPF_F_ALLOW_MULTI,
	}); err != nil {
		return fmt.Errorf("device filter: attach: %w", err)
	}
	var errs []error
	for _, id := range old {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		if err := link.RawDetachProgram(link.RawDetachProgramOptions{Target: fd, Program: p, Attach: ebpf.AttachCGroupDevice}); err != nil {
			errs = append(errs, err)
		}
		p.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("device filter: detach the earlier rules: %w", err)
	}
	return nil
}
