package contain

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A job's device filter is closed: its cgroup may read, write (and make,
// with mknod, which opens nothing) only the character devices a job
// needs, and nothing else, block devices included:
//
//	1:3 null, 1:5 zero, 1:7 full, 1:8 random, 1:9 urandom
//	5:0 tty, 5:2 ptmx, 136-143:* the pseudo-terminals (/dev/pts/N)
//	195:255 nvidiactl, 195:254 nvidia-modeset
//	195:N its own GPUs (/dev/nvidiaN)
//	U:0 nvidia-uvm, U:1 nvidia-uvm-tools (U: the major the kernel gave nvidia-uvm)
//	C:m its MIG slices' two access capabilities (C: nvidia-caps' major;
//	    m: from /proc/driver/nvidia-caps/mig-minors), never the MIG config
//	    or monitor capability, nor another slice's
//
// plus what the node's admin adds (NodeDevices.Extra). nvidia-uvm and
// nvidia-caps get their majors at module load: NodeDevices reads them from
// /proc/devices. The rules are one list (jobRules) that v1 writes as an
// allow-list and v2 compiles to an eBPF program (devfilter.go).

// Default paths of the kernel's device lists.
const (
	ProcDevices   = "/proc/devices"
	MIGMinorsFile = "/proc/driver/nvidia-caps/mig-minors"
)

// Fixed device numbers of the closed filter (Documentation/admin-guide/devices.txt).
const (
	memMajor   = 1 // null 3, zero 5, full 7, random 8, urandom 9
	ttyMajor   = 5 // tty 0, ptmx 2
	ptsFirst   = 136
	ptsLast    = 143
	uvmMinor   = 0
	uvmTools   = 1
	maxMinor   = 1<<20 - 1
	maxMajor   = 1<<12 - 1
	nvModeset  = lastGPUMinor + 1
	nvidiactl  = lastGPUMinor + 2
	anyMinor   = -1
	capsDriver = "nvidia-caps"
	uvmDriver  = "nvidia-uvm"
)

// NodeDevices are the node's device numbers that a job's filter needs and
// that the kernel hands out at run time. The zero value is a node without
// nvidia-uvm or nvidia-caps: those rules are left out.
type NodeDevices struct {
	UVMMajor  int64 `json:"uvm_major,omitempty"`  // nvidia-uvm's major; 0: none
	CapsMajor int64 `json:"caps_major,omitempty"` // nvidia-caps' major; 0: none
	// Extra are character devices the node's admin lets every job open
	// besides (corral agent --allow-device, e.g. InfiniBand's
	// 231:* or /dev/fuse 10:229).
	Extra []Device `json:"extra,omitempty"`
	// Nvidia: the kernel lists NVIDIA's driver (major 195), so that a
	// missing nvidia-uvm is a module not loaded yet (ReadNodeDevices).
	Nvidia bool `json:"-"`
}

// Device is one character device rule: Major:Minor, Minor -1 for all of
// the major's.
type Device struct {
	Major int64 `json:"major"`
	Minor int64 `json:"minor"`
}

func (d Device) String() string {
	if d.Minor == anyMinor {
		return fmt.Sprintf("%d:*", d.Major)
	}
	return fmt.Sprintf("%d:%d", d.Major, d.Minor)
}

// ParseDevice reads a character device rule, "MAJOR:MINOR" or "MAJOR:*".
func ParseDevice(s string) (Device, error) {
	ma, mi, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Device{}, fmt.Errorf("device %q: want MAJOR:MINOR or MAJOR:*", s)
	}
	major, err := strconv.ParseInt(ma, 10, 64)
	if err != nil || major < 0 || major > maxMajor {
		return Device{}, fmt.Errorf("device %q: major %q: want 0-%d", s, ma, maxMajor)
	}
	d := Device{Major: major, Minor: anyMinor}
	if mi == "*" {
		return d, nil
	}
	if d.Minor, err = strconv.ParseInt(mi, 10, 64); err != nil || d.Minor < 0 || d.Minor > maxMinor {
		return Device{}, fmt.Errorf("device %q: minor %q: want 0-%d or *", s, mi, maxMinor)
	}
	return d, nil
}

// validate reports device numbers a filter cannot hold.
func (n NodeDevices) validate() error {
	for _, m := range []int64{n.UVMMajor, n.CapsMajor} {
		if m < 0 || m > maxMajor {
			return fmt.Errorf("device major %d: want 0-%d", m, maxMajor)
		}
	}
	for _, d := range n.Extra {
		if d.Major < 0 || d.Major > maxMajor || d.Minor < anyMinor || d.Minor > maxMinor {
			return fmt.Errorf("extra device %s: out of range", d)
		}
		if d.Major == NvidiaMajor || (n.CapsMajor != 0 && d.Major == n.CapsMajor) {
			return fmt.Errorf("extra device %s: NVIDIA's GPUs and MIG capabilities are each job's own, not every job's", d)
		}
	}
	return nil
}

// ReadNodeDevices reads nvidia-uvm's and nvidia-caps' majors from the
// kernel's device list (ProcDevices); a missing list or driver leaves
// them 0.
func ReadNodeDevices(procDevices string) (NodeDevices, error) {
	var n NodeDevices
	f, err := os.Open(procDevices)
	if errors.Is(err, os.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("device majors: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if strings.HasPrefix(line, "Block devices") {
			break
		}
		num, name, ok := strings.Cut(line, " ")
		major, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			continue
		}
		switch strings.TrimSpace(name) {
		case "nvidia":
			n.Nvidia = major == NvidiaMajor
		case uvmDriver:
			n.UVMMajor = major
		case capsDriver:
			n.CapsMajor = major
		}
	}
	if err := s.Err(); err != nil {
		return n, fmt.Errorf("device majors: %w", err)
	}
	return n, nil
}

// MIGCaps is the driver's list of MIG capability minors
// (MIGMinorsFile): "config 1", "monitor 2", "gpu0/gi1/access 12",
// "gpu0/gi1/ci0/access 13", ..., by name. gpuN there is the GPU's minor
// number (/dev/nvidiaN).
type MIGCaps map[string]int64

// ReadMIGCaps reads the driver's MIG capability minors from path; a node
// without the file (no MIG-capable driver) has none.
func ReadMIGCaps(path string) (MIGCaps, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return MIGCaps{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mig capabilities: %w", err)
	}
	caps := MIGCaps{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		m, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || m < 0 || m > maxMinor {
			return nil, fmt.Errorf("mig capabilities %s: bad line %q", path, strings.TrimSpace(line))
		}
		caps[f[0]] = m
	}
	return caps, nil
}

// SliceMinors are the two capability minors a job needs to use the MIG
// device of GPU instance gi, compute instance ci on the GPU of minor
// gpuMinor: the GPU instance's access and the compute instance's. The
// config and monitor capabilities are never among them.
func (c MIGCaps) SliceMinors(gpuMinor, gi, ci int) ([]int64, error) {
	gin := fmt.Sprintf("gpu%d/gi%d/access", gpuMinor, gi)
	cin := fmt.Sprintf("gpu%d/gi%d/ci%d/access", gpuMinor, gi, ci)
	g, ok := c[gin]
	if !ok {
		return nil, fmt.Errorf("mig device gpu%d/gi%d/ci%d: the driver lists no capability %s", gpuMinor, gi, ci, gin)
	}
	m, ok := c[cin]
	if !ok {
		return nil, fmt.Errorf("mig device gpu%d/gi%d/ci%d: the driver lists no capability %s", gpuMinor, gi, ci, cin)
	}
	for _, name := range []string{"config", "monitor"} {
		if v, ok := c[name]; ok && (v == g || v == m) {
			return nil, fmt.Errorf("mig device gpu%d/gi%d/ci%d: its capability minor is the %s capability's", gpuMinor, gi, ci, name)
		}
	}
	return []int64{g, m}, nil
}

// jobRules is the closed list of character devices (read, write) an
// attempt of spec may open; parent (v1's node parent, which every
// attempt's list narrows) has every GPU and every MIG capability instead
// of the attempt's own.
func jobRules(spec Spec, parent bool) []Device {
	rules := []Device{
		{memMajor, 3}, {memMajor, 5}, {memMajor, 7}, {memMajor, 8}, {memMajor, 9},
		{ttyMajor, 0}, {ttyMajor, 2},
	}
	for m := int64(ptsFirst); m <= ptsLast; m++ {
		rules = append(rules, Device{m, anyMinor})
	}
	rules = append(rules, Device{NvidiaMajor, nvModeset}, Device{NvidiaMajor, nvidiactl})
	nd := spec.Devices
	if nd.UVMMajor != 0 {
		rules = append(rules, Device{nd.UVMMajor, uvmMinor}, Device{nd.UVMMajor, uvmTools})
	}
	rules = append(rules, nd.Extra...)
	if parent {
		rules = append(rules, Device{NvidiaMajor, anyMinor})
		if nd.CapsMajor != 0 {
			rules = append(rules, Device{nd.CapsMajor, anyMinor})
		}
		return rules
	}
	for _, g := range spec.GPUMinors {
		rules = append(rules, Device{NvidiaMajor, int64(g)})
	}
	for _, c := range spec.CapMinors {
		rules = append(rules, Device{nd.CapsMajor, c})
	}
	return rules
}

// validateCaps reports a spec whose MIG capabilities cannot be held.
func (s Spec) validateCaps() error {
	if len(s.CapMinors) > 0 && s.Devices.CapsMajor == 0 {
		return errors.New("cap_minors without the node's nvidia-caps major")
	}
	for _, m := range s.CapMinors {
		if m < 0 || m > maxMinor {
			return fmt.Errorf("cap minor %d: want 0-%d", m, maxMinor)
		}
	}
	return s.Devices.validate()
}
