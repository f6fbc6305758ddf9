// Package contain holds each job attempt in a cgroup of its own, as Slurm's
// proctrack/cgroup and ConstrainDevices do: whatever the job forks (setsid,
// a double fork, nohup, a daemon) stays in the cgroup and is killed with it;
// its memory and CPU are limited; and the device controller lets it open
// only the devices a job needs: its own GPUs and MIG slices, not another's
// (a closed list: devices.go). All kernel writes go through runc's
// github.com/opencontainers/cgroups (v2 where the unified hierarchy is the
// hierarchy, v1 otherwise), but for the device rules under v2: one eBPF
// program of Corral's own (devfilter.go).
//
// Where cgroups cannot be written (not root, no delegation) an agent falls
// back to process groups (ProcessGroup): Probe says which mode a node gets
// and why.
//
// Layout: a node's cgroups live under one parent, corral/<scope> (see
// Parent), relative to the agent's own cgroup in each hierarchy; an
// attempt's cgroup is <parent>/<job>.<attempt>.<rank>. Leftovers of an
// earlier agent are found there and removed by Sweep.
//
//	agent ── NewTree(parent).Prepare() once (v1: the parent's device allow-list), LimitPids (the node's task cap)
//	  ── per attempt: start child gated (Gate) ── Tree.Open(name).Add(pid) ── release gate
//	  └─ main process ends / stop ── Cgroup.Kill ── end reported ── Cgroup.Destroy (rmdir)
package contain

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	// The devices package gives the managers their device controller (v1
	// devices.allow/deny); without it device rules fail.
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"

	"github.com/corral-sched/corral/internal/api"
)

// The containment modes a node reports (api.Node's containment).
const (
	CgroupV2     = api.ContainCgroupV2
	CgroupV1     = api.ContainCgroupV1
	ProcessGroup = api.ContainProcessGroup
)

// NVIDIA's character device major: /dev/nvidiaN is 195:N, nvidia-modeset
// 195:254, nvidiactl 195:255 (nvidia-uvm has a major of its own).
const (
	NvidiaMajor = 195
	// lastGPUMinor is the highest minor a GPU can have: 254 and 255 are
	// nvidia-modeset and nvidiactl, which every job may open.
	lastGPUMinor = 253
)

// Spec is what an attempt's cgroup holds it to.
type Spec struct {
	// MemMiB caps its memory (MiB); past it the kernel's OOM killer acts
	// inside the cgroup. 0: no limit.
	MemMiB int64 `json:"mem_mib,omitempty"`
	// CPUs caps its CPU time, in CPUs (1.5: one and a half). 0: no limit.
	CPUs float64 `json:"cpus,omitempty"`
	// GPUMinors are the minor numbers of the job's own GPUs' device nodes
	// (195:N). Every other GPU is denied, as is every device not in the
	// closed list (devices.go).
	GPUMinors []int `json:"gpu_minors,omitempty"`
	// CapMinors are the nvidia-caps minors of the job's MIG slices (two
	// each: MIGCaps.SliceMinors); needs Devices.CapsMajor.
	CapMinors []int64 `json:"cap_minors,omitempty"`
	// Devices are the node's run-time device majors and its admin's extra
	// devices (ReadNodeDevices).
	Devices NodeDevices `json:"devices"`
	// Pids caps the tasks (processes and threads) alive in the cgroup at
	// once, so that a fork bomb takes its own job down, not the node. 0:
	// no limit.
	Pids int64 `json:"pids,omitempty"`
	// NodePids is the node's cap on all its attempts' tasks together,
	// held by the parent cgroup (Tree.LimitPids; pids.go). With it set an
	// attempt is made in the pids hierarchy under the parent even without
	// a Pids of its own, and one that finds the parent gone (removed while
	// the node was idle) gives the parent it makes again the cap. 0: none.
	NodePids int64 `json:"node_pids,omitempty"`
}

// Validate reports a spec a cgroup cannot take.
func (s Spec) Validate() error {
	switch {
	case s.MemMiB < 0:
		return fmt.Errorf("mem_mib %d: must not be negative", s.MemMiB)
	case s.CPUs < 0 || s.CPUs != s.CPUs || s.CPUs > 1e6:
		return fmt.Errorf("cpus %v: want 0 (no limit) up to 1e6", s.CPUs)
	case s.Pids < 0 || s.Pids > MaxPids:
		return fmt.Errorf("pids %d: want 0 (no limit) up to %d", s.Pids, MaxPids)
	case s.NodePids < 0 || s.NodePids > MaxPids:
		return fmt.Errorf("node_pids %d: want 0 (no limit) up to %d", s.NodePids, MaxPids)
	}
	for _, m := range s.GPUMinors {
		if m < 0 || m > lastGPUMinor {
			return fmt.Errorf("gpu minor %d: want 0-%d", m, lastGPUMinor)
		}
	}
	return s.validateCaps()
}

// MaxPids bounds Spec.Pids: the kernel's own ceiling on pid numbers
// (PID_MAX_LIMIT on 64-bit).
const MaxPids = 1 << 22

// cpuPeriod is the CFS period the CPU quota is a share of (100 ms).
const cpuPeriod = 100000

// resources turns a spec into the library's resources, less its device
// rules (v1 allowRules, v2 deviceFilter).
func (s Spec) resources() *cgroups.Resources {
	r := &cgroups.Resources{}
	if s.MemMiB > 0 {
		r.Memory = s.MemMiB << 20
	}
	if s.CPUs > 0 {
		r.CpuPeriod = cpuPeriod
		r.CpuQuota = max(int64(s.CPUs*cpuPeriod), 1000)
	}
	if s.Pids > 0 {
		r.PidsLimit = &s.Pids
	}
	return r
}

// Parent is the cgroup under which a node's attempts run: corral/<node>-<h>,
// where h hashes the node id with what tells this node's agents from
// others on the same machine (the server URL of a standalone agent, the
// data directory of `corral up`), so that one never sweeps another's jobs.
func Parent(nodeID, owner string) string {
	h := fnv.New32a()
	h.Write([]byte(nodeID + "\x00" + owner))
	return fmt.Sprintf("corral/%s-%08x", sanitize(nodeID), h.Sum32())
}

// sanitize keeps a name to characters safe in a cgroup path.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 || b[0] == '.' {
		return "_" + string(b)
	}
	return string(b)
}

// Mode is the cgroup mode of this machine: CgroupV2 where the unified
// hierarchy is the only one, CgroupV1 otherwise (a side cgroup2 mount of a
// hybrid system counts as v1).
func Mode() string {
	if cgroups.IsCgroup2UnifiedMode() {
		return CgroupV2
	}
	return CgroupV1
}

// Probe tells whether attempts can be held in cgroups under parent: it
// makes a cgroup there with a memory, CPU and device limit, puts nothing
// in it, and removes it (as root, or as a user the hierarchy is delegated
// to). It returns Mode() when that worked, or
// ProcessGroup and the reason it did not.
func Probe(parent string) (string, error) {
	path := filepath.Join(parent, fmt.Sprintf("probe-%d", os.Getpid()))
	cg, err := Open(path, Spec{MemMiB: 64, CPUs: 1})
	if err != nil {
		why := "no delegation to this user"
		if os.Geteuid() != 0 {
			why = "not root, and no delegation"
		}
		return ProcessGroup, fmt.Errorf("cgroups cannot be written (%s?): %w", why, err)
	}
	if err := cg.Destroy(); err != nil {
		return ProcessGroup, err
	}
	return Mode(), nil
}

// Cgroup is one attempt's cgroup. Its methods may be called from any
// goroutine, but Add and Destroy not at once.
type Cgroup struct {
	path string
	m    cgroups.Manager
}

// Open makes the cgroup at path (relative to this process's own cgroups)
// with the spec's limits, or takes it over as it is where it exists. It is
// Tree.Open with the tree resolved for this one cgroup.
func Open(path string, spec Spec) (*Cgroup, error) {
	t, err := NewTree(filepath.Dir(path), spec.Devices)
	if err != nil {
		return nil, err
	}
	return t.Open(filepath.Base(path), spec)
}

// openV2 makes a cgroup under v2, where the device rules are one eBPF
// program: deviceFilter's, not the library's (devfilter.go).
func openV2(path string, spec Spec) (*Cgroup, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	r := spec.resources()
	r.SkipDevices = true // attachDeviceFilter's
	cg, err := load(path, r)
	if err != nil {
		return nil, err
	}
	parentGone := false
	if spec.NodePids > 0 {
		_, err := os.Stat(filepath.Dir(cg.m.Path("")))
		parentGone = errors.Is(err, os.ErrNotExist)
	}
	if err := cg.m.Apply(-1); err != nil {
		return nil, fmt.Errorf("cgroup %s: create: %w", path, err)
	}
	if parentGone { // made again just now: the node's cap first (pids.go)
		if err := limitPidsV2(filepath.Dir(path), spec.NodePids); err != nil {
			cg.m.Destroy()
			return nil, err
		}
	}
	if err := cg.m.Set(r); err != nil {
		cg.m.Destroy()
		return nil, fmt.Errorf("cgroup %s: set limits: %w", path, err)
	}
	if err := attachDeviceFilter(cg.m.Path(""), spec); err != nil {
		cg.m.Destroy()
		return nil, fmt.Errorf("cgroup %s: %w", path, err)
	}
	return cg, nil
}

// load returns a manager of the cgroup at path without touching it.
func load(path string, r *cgroups.Resources) (*Cgroup, error) {
	if r == nil {
		r = &cgroups.Resources{}
	}
	m, err := manager.New(&cgroups.Cgroup{Path: path, Resources: r})
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", path, err)
	}
	return &Cgroup{path: path, m: m}, nil
}

// Path is the cgroup's path, relative to its agent's own cgroup.
func (c *Cgroup) Path() string { return c.path }

// Add moves a process into the cgroup. A gated child (Gate) is added
// before it runs any of the job's code, so everything it forks is inside.
func (c *Cgroup) Add(pid int) error {
	if err := c.m.Apply(pid); err != nil {
		return fmt.Errorf("cgroup %s: add pid %d: %w", c.path, pid, err)
	}
	return nil
}

// OOMKills is how many processes of the cgroup the kernel's OOM killer
// has killed (0 when unknown). Read it before Destroy.
func (c *Cgroup) OOMKills() uint64 {
	n, err := c.m.OOMKillCount()
	if err != nil {
		return 0
	}
	return n
}

// Pids lists the processes in the cgroup.
func (c *Cgroup) Pids() ([]int, error) { return c.m.GetAllPids() }

// killRounds bounds Kill's freeze-kill-thaw rounds; killWait is the pause
// after each while the killed processes exit.
const (
	killRounds = 200
	killWait   = 5 * time.Millisecond
)

// Kill SIGKILLs every process in the cgroup, freezing it first so that
// none can fork a new one meanwhile, and returns once it is empty (or
// gone). Processes cannot leave a cgroup they do not own, so nothing
// escapes.
func (c *Cgroup) Kill() error {
	var last []int
	for range killRounds {
		pids, err := c.m.GetAllPids()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("cgroup %s: list: %w", c.path, err)
		}
		if len(pids) == 0 {
			return nil
		}
		last = pids
		froze := c.m.Freeze(cgroups.Frozen) == nil
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if froze {
			c.m.Freeze(cgroups.Thawed)
		}
		time.Sleep(killWait)
	}
	return fmt.Errorf("cgroup %s: processes %v survive SIGKILL", c.path, last)
}

// Destroy kills whatever is left in the cgroup and removes it. Removing a
// cgroup that is gone is not an error.
func (c *Cgroup) Destroy() error {
	kerr := c.Kill()
	if err := c.m.Destroy(); err != nil {
		return errors.Join(kerr, fmt.Errorf("cgroup %s: remove: %w", c.path, err))
	}
	return kerr
}

// Remove kills and removes the cgroup at path, if there is one.
func Remove(path string) error {
	cg, err := load(path, nil)
	if err != nil {
		return err
	}
	return cg.Destroy()
}

// RemoveIfEmpty removes the cgroup at path and the empty ones under it,
// where no process runs anywhere in it; it kills nothing.
func RemoveIfEmpty(path string) error {
	cg, err := load(path, nil)
	if err != nil {
		return err
	}
	if pids, err := cg.Pids(); err == nil && len(pids) > 0 {
		return fmt.Errorf("cgroup %s: %d processes still run in it", path, len(pids))
	}
	return cg.m.Destroy()
}

// RemoveUnused removes the cgroup at path where it has neither a process
// nor a cgroup under it, in every hierarchy; it kills and sweeps nothing,
// so a cgroup another agent has just made under it (its job not yet
// admitted) stays, and so does path. A cgroup that is gone is not an error.
func RemoveUnused(path string) error {
	cg, err := load(path, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range cg.m.GetPaths() {
		if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// Sweep kills and removes every cgroup under parent whose name keep does
// not claim (an earlier agent's attempts that no one adopted), and returns
// the names it removed.
func Sweep(parent string, keep func(name string) bool) ([]string, error) {
	pcg, err := load(parent, nil)
	if err != nil {
		return nil, err
	}
	dir := pcg.m.Path("freezer")
	if Mode() == CgroupV2 {
		dir = pcg.m.Path("")
	}
	if dir == "" {
		return nil, fmt.Errorf("cgroup %s: no hierarchy to list", parent)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("cgroup %s: %w", parent, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || keep(e.Name()) {
			continue
		}
		if err := Remove(filepath.Join(parent, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// gateLine waits for one line on fd 3, and exits 126 (running nothing
// more) if fd 3 closes first.
const gateLine = `read _ <&3 || exit 126; exec 3<&-`

// gateScript is gateLine, then it execs the job's argv ("$@").
const gateScript = gateLine + `; exec "$@"`

// Gate returns argv wrapped so that it waits, before running any of the
// job's code, until Release is called with the write end of the pipe given
// to the child as fd 3 (cmd.ExtraFiles[0]). The job's own argv, $0, exit
// codes and signals are what they were. A job that is a shell command
// (/bin/sh -c SCRIPT, as every Corral job is) is gated by its own shell:
// the gate is the script's first line, which the shell runs (and blocks
// in) before it reads the next, so the job costs no second exec; its
// positional parameters stay empty and $0 /bin/sh, and only its line
// numbers (LINENO, a syntax error's message) count one more. Any other argv
// is wrapped in a gate shell that execs it.
func Gate(argv []string) []string {
	if len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" {
		return []string{"/bin/sh", "-c", gateLine + "\n" + argv[2]}
	}
	return append([]string{"/bin/sh", "-c", gateScript, "corral-gate"}, argv...)
}

// Release lets a gated child go on, and closes w.
func Release(w *os.File) error {
	_, err := w.Write([]byte("\n"))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// NameOf returns an attempt's cgroup name under its node's parent.
func NameOf(job string, attempt, rank int) string {
	return fmt.Sprintf("%s.%d.%d", sanitize(job), attempt, rank)
}

// ParseName splits an attempt's cgroup name into its job and attempt.
func ParseName(name string) (job, attempt string, ok bool) {
	rest, _, ok := cutLast(name)
	if !ok {
		return "", "", false
	}
	return cutLast(rest)
}

func cutLast(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}
