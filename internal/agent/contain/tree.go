package contain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
// made: the closed list of devices.go with all of NVIDIA's 195:* and all
// of nvidia-caps' minors. An attempt's cgroup then needs one write to take
// 195:* away and one to give each of its own GPUs back (nvidiactl 195:255
// and nvidia-modeset 195:254 the parent lists on their own), and the same
// for nvidia-caps and its MIG slices' capabilities. A v1 cgroup can only
// ever be narrower than its parent, so nothing a job's cgroup is allowed
// has to be granted above what the parent has.
// Under v2 Tree.Open is Open: the device filter is one eBPF program of a
// few dozen instructions (deviceFilter) whatever the GPUs.
type Tree struct {
	parent string            // relative to the agent's own cgroups
	paths  map[string]string // v1: hierarchy -> the parent's directory; nil under v2
	devs   NodeDevices       // the node's device majors the parent's list names
	// prepared: Prepare gave the parent its allow-list, so Open may write
	// a new attempt's device rules itself (set) rather than through the
	// library, which reads and parses the whole inherited list twice.
	// Cleared when the parent is found gone (whoever makes it again makes
	// it allow-all).
	prepared atomic.Bool
}

// v1Controllers are the v1 hierarchies an attempt's cgroup is made in.
func v1Controllers() []string { return []string{"devices", "memory", "cpu", "freezer", "pids"} }

// NewTree resolves the node's parent cgroup, relative to this process's
// own cgroups in each hierarchy, for attempts on a node of devices devs
// (ReadNodeDevices). It touches nothing.
func NewTree(parent string, devs NodeDevices) (*Tree, error) {
	if err := devs.validate(); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", parent, err)
	}
	t := &Tree{parent: parent, devs: devs}
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
	list := allowRules(Spec{Devices: t.devs}, true)
	m, err := manager.NewWithPaths(&cgroups.Cgroup{Path: t.parent,
		Resources: &cgroups.Resources{Devices: list}}, t.cloned(""))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", t.parent, err)
	}
	if err := m.Apply(-1); err != nil {
		return fmt.Errorf("cgroup %s: create: %w", t.parent, err)
	}
	if err := m.Set(&cgroups.Resources{Devices: list}); err != nil {
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
		// The fast path writes only what differs from the parent's
		// list, which names the tree's devices.
		fresh = t.prepared.Load() && sameDevices(spec.Devices, t.devs)
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
	if err := t.set(m, r, spec, fresh); err != nil {
		m.Destroy()
		return nil, fmt.Errorf("cgroup %s: set limits: %w", path, err)
	}
	return cg, nil
}

// set gives an attempt's cgroup its limits. Its device rules are the
// parent's allow-list less 195:* and nvidia-caps' *, plus its own GPUs
// and MIG capabilities: a fresh cgroup under the prepared parent holds
// that list, so they are written directly (one write for 195:*, one per
// GPU; the same for nvidia-caps); anything else (an unprepared parent, a
// cgroup taken over) goes through the library, which writes what differs
// and checks the result.
func (t *Tree) set(m cgroups.Manager, r *cgroups.Resources, spec Spec, fresh bool) error {
	dir := m.Path("devices")
	if !fresh {
		r.Devices = allowRules(spec, false)
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
	for _, g := range spec.GPUMinors {
		if err := cgroups.WriteFile(dir, "devices.allow", fmt.Sprintf("c %d:%d rwm", NvidiaMajor, g)); err != nil {
			return err
		}
	}
	caps := spec.Devices.CapsMajor
	if caps == 0 {
		return nil
	}
	if err := cgroups.WriteFile(dir, "devices.deny", fmt.Sprintf("c %d:* rwm", caps)); err != nil {
		return err
	}
	for _, c := range spec.CapMinors {
		if err := cgroups.WriteFile(dir, "devices.allow", fmt.Sprintf("c %d:%d rwm", caps, c)); err != nil {
			return err
		}
	}
	return nil
}

// sameDevices: a and b name the same device numbers.
func sameDevices(a, b NodeDevices) bool {
	return a.UVMMajor == b.UVMMajor && a.CapsMajor == b.CapsMajor && slices.Equal(a.Extra, b.Extra)
}

// allowRules is the v1 device allow-list (the cgroup denies what it does
// not list): mknod of any device (which opens nothing), and read and
// write of jobRules' closed list; parent (the node's) allows every NVIDIA
// GPU minor and every MIG capability instead of the attempt's own.
func allowRules(spec Spec, parent bool) []*devconfig.Rule {
	rule := func(t devconfig.Type, major, minor int64, perms string) *devconfig.Rule {
		return &devconfig.Rule{Type: t, Major: major, Minor: minor, Permissions: devconfig.Permissions(perms), Allow: true}
	}
	rules := []*devconfig.Rule{
		rule(devconfig.BlockDevice, devconfig.Wildcard, devconfig.Wildcard, "m"),
		rule(devconfig.CharDevice, devconfig.Wildcard, devconfig.Wildcard, "m"),
	}
	for _, d := range jobRules(spec, parent) {
		minor := d.Minor
		if minor == anyMinor {
			minor = devconfig.Wildcard
		}
		rules = append(rules, rule(devconfig.CharDevice, d.Major, minor, "rwm"))
	}
	return rules
}
