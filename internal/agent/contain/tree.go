package contain

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/opencontainers/cgroups"
	devconfig "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/cgroups/manager"
)

// Tree is a node's parent cgroup (see Parent), resolved once, so that
// making an attempt's cgroup under it (Tree.Open) costs no look-up of the
// agent's own cgroups and mounts, and, under v1, only the device rules in
// which the attempt differs from the parent.
//
// Under v1 an attempt's cgroup is made in five hierarchies only: devices,
// memory, cpu (its CFS quota; not made without one), freezer (Kill) and
// pids (its task limit, or the node's: not made without either; the
// node's cap is the parent's own pids.max, LimitPids). The parent holds the node's
// device allow-list (Prepare), which a child cgroup inherits when it is
// made: every block device, mknod of any device, every character major but
// NVIDIA's, and all of NVIDIA's 195:*. An attempt's cgroup then needs one
// write to take 195:* away and one to give each of its own GPUs back
// (nvidiactl 195:255 and nvidia-modeset 195:254 the parent lists on their
// own). A v1 cgroup can only ever be narrower than its parent, so nothing
// a job's cgroup is allowed has to be granted above what the parent has.
// Under v2 Tree.Open is Open: the device filter is one eBPF program of a
// dozen instructions (deviceFilter) whatever the GPUs.
type Tree struct {
	parent string            // relative to the agent's own cgroups
	paths  map[string]string // v1: hierarchy -> the parent's directory; nil under v2
	majors []int64           // v1: the character majors allowed whole (all but NVIDIA's)
	// prepared: Prepare gave the parent its allow-list, so Open may write
	// a new attempt's device rules itself (set) rather than through the
	// library, which reads and parses the whole inherited list twice.
	// Cleared when the parent is found gone (whoever makes it again makes
	// it allow-all).
	prepared atomic.Bool
}

// v1Controllers are the v1 hierarchies an attempt's cgroup is made in.
func v1Controllers() []string { return []string{"devices", "memory", "cpu", "freezer", "pids"} }

// maxCharMajor bounds the character majors the allow-list names: Linux
// (since 4.14) registers none at or above 512 (CHRDEV_MAJOR_MAX); any
// listed in /proc/devices above it are added too.
const maxCharMajor = 511

// NewTree resolves the node's parent cgroup, relative to this process's
// own cgroups in each hierarchy. It touches nothing.
func NewTree(parent string) (*Tree, error) {
	t := &Tree{parent: parent}
	if Mode() == CgroupV2 {
		return t, nil
	}
	t.paths = map[string]string{}
	for _, c := range v1Controllers() {
		own, err := cgroups.GetOwnCgroupPath(c)
		if err != nil {
			if cgroups.IsNotFound(err) && c != "devices" {
				continue // as the library does: no such hierarchy, no limit of its kind
			}
			return nil, fmt.Errorf("cgroup %s: %s hierarchy: %w", parent, c, err)
		}
		t.paths[c] = filepath.Join(own, parent)
	}
	majors, err := charMajors("/proc/devices")
	if err != nil {
		return nil, err
	}
	t.majors = majors
	return t, nil
}

// Parent is the tree's parent, relative to the agent's own cgroups.
func (t *Tree) Parent() string { return t.parent }

// Prepare makes the parent cgroup and, under v1, gives it the node's
// device allow-list (see Tree), writing only what differs from what it
// has. It fails where the parent's mode must change (allow-all to
// allow-list) while cgroups exist under it (an earlier agent's); attempts
// are still held to their own rules then, at the cost of more writes each.
func (t *Tree) Prepare() error {
	if t.paths == nil {
		return nil
	}
	m, err := manager.NewWithPaths(&cgroups.Cgroup{Path: t.parent,
		Resources: &cgroups.Resources{Devices: allowRules(t.majors, nil, true)}}, t.cloned(""))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", t.parent, err)
	}
	if err := m.Apply(-1); err != nil {
		return fmt.Errorf("cgroup %s: create: %w", t.parent, err)
	}
	if err := m.Set(&cgroups.Resources{Devices: allowRules(t.majors, nil, true)}); err != nil {
		return fmt.Errorf("cgroup %s: device allow-list: %w", t.parent, err)
	}
	t.prepared.Store(true)
	return nil
}

// cloned is the tree's v1 paths with name joined to each.
func (t *Tree) cloned(name string) map[string]string {
	p := make(map[string]string, len(t.paths))
	for c, dir := range t.paths {
		p[c] = filepath.Join(dir, name)
	}
	return p
}

// Open makes the attempt's cgroup <parent>/<name> (see NameOf) with the
// spec's limits, or takes it over as it is where it exists.
func (t *Tree) Open(name string, spec Spec) (*Cgroup, error) {
	path := filepath.Join(t.parent, name)
	if t.paths == nil {
		return openV2(path, spec)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	r := spec.resources() // its device rules only where set needs them
	paths := t.cloned(name)
	if r.CpuQuota == 0 {
		delete(paths, "cpu") // no quota: nothing to hold it to there
	}
	if r.PidsLimit == nil && spec.NodePids == 0 {
		delete(paths, "pids") // likewise; with a node cap, the parent's pids.max holds it (pids.go)
	}
	m, err := manager.NewWithPaths(&cgroups.Cgroup{Path: path, Resources: r}, paths)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", path, err)
	}
	cg := &Cgroup{path: path, m: m}
	// Made here, in the devices hierarchy, the cgroup is new and holds its
	// parent's list; one that exists is taken over, and a parent that is
	// gone is made again by Apply, allow-all.
	fresh, parentGone := false, false
	switch err := os.Mkdir(m.Path("devices"), 0o755); {
	case err == nil:
		fresh = t.prepared.Load()
	case errors.Is(err, os.ErrNotExist):
		t.prepared.Store(false)
		parentGone = true
	case !errors.Is(err, os.ErrExist):
		return nil, fmt.Errorf("cgroup %s: create: %w", path, err)
	}
	if err := m.Apply(-1); err != nil {
		m.Destroy()
		return nil, fmt.Errorf("cgroup %s: create: %w", path, err)
	}
	if parentGone && spec.NodePids > 0 { // made again just now: the node's cap first (pids.go)
		if err := limitPidsV1(t.parent, t.paths["pids"], spec.NodePids); err != nil {
			m.Destroy()
			return nil, err
		}
	}
	if err := t.set(m, r, spec.GPUMinors, fresh); err != nil {
		m.Destroy()
		return nil, fmt.Errorf("cgroup %s: set limits: %w", path, err)
	}
	return cg, nil
}

// set gives an attempt's cgroup its limits. Its device rules are the
// parent's allow-list less 195:* plus its own GPUs: a fresh cgroup under
// the prepared parent holds that list, so they are written directly (one
// write for 195:*, one per GPU); anything else (an unprepared parent, a
// cgroup taken over) goes through the library, which writes what differs
// and checks the result.
func (t *Tree) set(m cgroups.Manager, r *cgroups.Resources, own []int, fresh bool) error {
	dir := m.Path("devices")
	if !fresh {
		r.Devices = allowRules(t.majors, own, false)
		return m.Set(r)
	}
	rest := *r
	rest.Devices, rest.SkipDevices = nil, true // memory, cpu
	if err := m.Set(&rest); err != nil {
		return err
	}
	if err := cgroups.WriteFile(dir, "devices.deny", fmt.Sprintf("c %d:* rwm", NvidiaMajor)); err != nil {
		return err
	}
	for _, g := range own {
		if err := cgroups.WriteFile(dir, "devices.allow", fmt.Sprintf("c %d:%d rwm", NvidiaMajor, g)); err != nil {
			return err
		}
	}
	return nil
}

// allowRules is the v1 device allow-list (the cgroup denies what it does
// not list): every block device, mknod of anything, every character major
// in majors, nvidiactl and nvidia-modeset, and of NVIDIA's GPUs the minors
// in own; allGPUs (the node's parent) allows every NVIDIA minor instead.
func allowRules(majors []int64, own []int, allGPUs bool) []*devconfig.Rule {
	rule := func(t devconfig.Type, major, minor int64, perms string) *devconfig.Rule {
		return &devconfig.Rule{Type: t, Major: major, Minor: minor, Permissions: devconfig.Permissions(perms), Allow: true}
	}
	rules := []*devconfig.Rule{
		rule(devconfig.BlockDevice, devconfig.Wildcard, devconfig.Wildcard, "rwm"),
		rule(devconfig.CharDevice, devconfig.Wildcard, devconfig.Wildcard, "m"),
		rule(devconfig.CharDevice, NvidiaMajor, lastGPUMinor+1, "rwm"), // nvidia-modeset
		rule(devconfig.CharDevice, NvidiaMajor, lastGPUMinor+2, "rwm"), // nvidiactl
	}
	for _, m := range majors {
		if m != NvidiaMajor {
			rules = append(rules, rule(devconfig.CharDevice, m, devconfig.Wildcard, "rwm"))
		}
	}
	if allGPUs {
		return append(rules, rule(devconfig.CharDevice, NvidiaMajor, devconfig.Wildcard, "rwm"))
	}
	for _, m := range own {
		rules = append(rules, rule(devconfig.CharDevice, NvidiaMajor, int64(m), "rwm"))
	}
	return rules
}

// charMajors is every character major up to maxCharMajor, and any above it
// that the kernel's device list (/proc/devices) names.
func charMajors(procDevices string) ([]int64, error) {
	majors := make([]int64, 0, maxCharMajor+1)
	for m := range int64(maxCharMajor + 1) {
		majors = append(majors, m)
	}
	f, err := os.Open(procDevices)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return majors, nil
		}
		return nil, fmt.Errorf("device majors: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "Block devices") {
			break
		}
		field, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if m, err := strconv.ParseInt(field, 10, 64); err == nil && m > maxCharMajor {
			majors = append(majors, m)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("device majors: %w", err)
	}
	return majors, nil
}
