package contain

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Fake majors for the run-time ones (unregistered here: an allowed node
// opens with ENXIO, a denied one fails with EPERM first).
const (
	fakeUVMMajor  = 510
	fakeCapsMajor = 509
)

// fakeMIGMinors is a driver's mig-minors list for two GPUs (minors 0 and
// 1) with one MIG slice each: gpu1's gi3/ci0 is the slice the tests hand
// out, gpu0's gi1/ci0 another job's.
const fakeMIGMinors = `config 1
monitor 2
gpu0/gi1/access 12
gpu0/gi1/ci0/access 13
gpu1/gi3/access 120
gpu1/gi3/ci0/access 121
`

// deviceNode is one fake device node of a class a job may or may not open.
type deviceNode struct {
	name         string
	block        bool
	major, minor uint32
}

// fakeDevices makes one device node of every class the filter tells
// apart in a temporary directory (skips where mknod is refused).
func fakeDevices(t *testing.T) (string, []deviceNode) {
	t.Helper()
	nodes := []deviceNode{
		{name: "null", major: 1, minor: 3}, {name: "zero", major: 1, minor: 5}, {name: "full", major: 1, minor: 7},
		{name: "random", major: 1, minor: 8}, {name: "urandom", major: 1, minor: 9},
		{name: "tty", major: 5, minor: 0}, {name: "ptmx", major: 5, minor: 2}, {name: "pts-3", major: 136, minor: 3},
		{name: "pts-143", major: 143, minor: 7},
		{name: "nvidiactl", major: 195, minor: 255}, {name: "nvidia-modeset", major: 195, minor: 254},
		{name: "nvidia0", major: 195, minor: 0}, {name: "nvidia1", major: 195, minor: 1},
		{name: "nvidia-uvm", major: fakeUVMMajor, minor: 0}, {name: "nvidia-uvm-tools", major: fakeUVMMajor, minor: 1},
		{name: "uvm-other", major: fakeUVMMajor, minor: 2},
		{name: "cap-config", major: fakeCapsMajor, minor: 1}, {name: "cap-monitor", major: fakeCapsMajor, minor: 2},
		{name: "cap-gpu0-gi1", major: fakeCapsMajor, minor: 12}, {name: "cap-gpu0-gi1-ci0", major: fakeCapsMajor, minor: 13},
		{name: "cap-gpu1-gi3", major: fakeCapsMajor, minor: 120}, {name: "cap-gpu1-gi3-ci0", major: fakeCapsMajor, minor: 121},
		{name: "mem", major: 1, minor: 1}, {name: "kmsg", major: 1, minor: 11}, {name: "tty1", major: 4, minor: 1},
		{name: "fuse", major: 10, minor: 229}, {name: "console", major: 5, minor: 1},
		{name: "loop0", block: true, major: 7, minor: 0},
	}
	dir := t.TempDir()
	for _, n := range nodes {
		mode := uint32(syscall.S_IFCHR)
		if n.block {
			mode = syscall.S_IFBLK
		}
		if err := syscall.Mknod(filepath.Join(dir, n.name), mode|0o666, int(n.major<<8|n.minor)); err != nil {
			t.Skipf("mknod: %v", err)
		}
	}
	return dir, nodes
}

// openScript tries to open each node read-write and says which were
// denied by the device controller (EPERM): "name EPERM" or "name ok".
const openScript = `for f in "$0"/*; do
  err=$( (: <>"$f") 2>&1 )
  case "$err" in *"not permitted"*) echo "${f##*/} EPERM";; *) echo "${f##*/} ok";; esac
done`

// checkClosedFilter proves, of cgroups made by open, that a job opens only
// the devices of the closed list (its own GPU and MIG slice among them)
// and gets EPERM from every other: another job's GPU or MIG slice, the MIG
// config and monitor capabilities, /dev/mem, a block device.
func checkClosedFilter(t *testing.T, devs NodeDevices, open func(name string, spec Spec) (*Cgroup, error)) {
	t.Helper()
	dir, nodes := fakeDevices(t)
	minorsFile := filepath.Join(t.TempDir(), "mig-minors")
	if err := os.WriteFile(minorsFile, []byte(fakeMIGMinors), 0o644); err != nil {
		t.Fatal(err)
	}
	caps, err := ReadMIGCaps(minorsFile)
	if err != nil {
		t.Fatal(err)
	}
	slice, err := caps.SliceMinors(1, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts-3", "pts-143",
		"nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools"}
	withDevs := devs
	withDevs.Extra = append(slices.Clone(devs.Extra), Device{Major: 10, Minor: 229})
	for _, tc := range []struct {
		name string
		spec Spec
		open []string // besides common; every other node is denied
	}{
		{"no gpus", Spec{Devices: devs}, nil},
		{"whole gpu 0", Spec{Devices: devs, GPUMinors: []int{0}}, []string{"nvidia0"}},
		{"mig slice of gpu 1", Spec{Devices: devs, GPUMinors: []int{1}, CapMinors: slice},
			[]string{"nvidia1", "cap-gpu1-gi3", "cap-gpu1-gi3-ci0"}},
		{"admin's extra device", Spec{Devices: withDevs}, []string{"fuse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, err := open(NameOf("closed-"+strings.ReplaceAll(tc.name, " ", "-"), 0, 0), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer cg.Destroy()
			cmd := startGated(t, cg, []string{"/bin/sh", "-c", openScript, dir})
			cmd.Wait()
			out := output(t, cmd)
			allowed := append(slices.Clone(common), tc.open...)
			for _, n := range nodes {
				want := "EPERM"
				if slices.Contains(allowed, n.name) {
					want = "ok"
				}
				if !strings.Contains(out, n.name+" "+want+"\n") {
					t.Errorf("%s (%d:%d): want %s; got:\n%s", n.name, n.major, n.minor, want, out)
				}
			}
		})
	}
}

// TestClosedFilterV1 is checkClosedFilter under v1 for an attempt's cgroup
// under a prepared parent (the fast path: only what differs from the
// parent's list is written) and for one whose rules go through the
// library in full (a parent not prepared).
func TestClosedFilterV1(t *testing.T) {
	devs := NodeDevices{UVMMajor: fakeUVMMajor, CapsMajor: fakeCapsMajor}
	t.Run("prepared parent", func(t *testing.T) {
		trees := map[string]*Tree{} // a node's parent lists its admin's extra devices too
		checkClosedFilter(t, devs, func(name string, spec Spec) (*Cgroup, error) {
			key := fmt.Sprint(spec.Devices)
			if trees[key] == nil {
				trees[key] = needTreeWith(t, spec.Devices)
			}
			return trees[key].Open(name, spec)
		})
	})
	t.Run("library", func(t *testing.T) {
		if Mode() != CgroupV1 {
			t.Skip("cgroup v1 only")
		}
		parent := needCgroups(t)
		checkClosedFilter(t, devs, func(name string, spec Spec) (*Cgroup, error) {
			return Open(filepath.Join(parent, name), spec)
		})
	})
}

// TestClosedFilterV2 is checkClosedFilter under cgroup v2 (deviceFilter's
// eBPF program): on a v2 machine here, elsewhere (as root) in a child
// process that sees a v2 hierarchy at /sys/fs/cgroup.
func TestClosedFilterV2(t *testing.T) {
	if inCgroupV2(t) {
		return
	}
	parent := Parent("test-node", t.TempDir())
	t.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	devs := NodeDevices{UVMMajor: fakeUVMMajor, CapsMajor: fakeCapsMajor}
	checkClosedFilter(t, devs, func(name string, spec Spec) (*Cgroup, error) {
		return Open(filepath.Join(parent, name), spec)
	})
}

func TestReadNodeDevices(t *testing.T) {
	f := filepath.Join(t.TempDir(), "devices")
	os.WriteFile(f, []byte("Character devices:\n  1 mem\n195 nvidia\n236 nvidia-caps\n237 nvidia-uvm\n508 nvidia-caps-imex-channels\n\nBlock devices:\n237 blk\n"), 0o644)
	for _, tc := range []struct {
		path string
		want NodeDevices
	}{
		{f, NodeDevices{UVMMajor: 237, CapsMajor: 236}},
		{filepath.Join(t.TempDir(), "none"), NodeDevices{}},
	} {
		got, err := ReadNodeDevices(tc.path)
		if err != nil || !sameDevices(got, tc.want) {
			t.Errorf("%s: %+v %v, want %+v", tc.path, got, err, tc.want)
		}
	}
}

func TestMIGCapsSliceMinors(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mig-minors")
	os.WriteFile(f, []byte(fakeMIGMinors), 0o644)
	caps, err := ReadMIGCaps(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gpu, gi, ci int
		want        []int64
	}{
		{1, 3, 0, []int64{120, 121}},
		{0, 1, 0, []int64{12, 13}},
		{0, 1, 1, nil}, // no such compute instance
		{2, 1, 0, nil}, // no such GPU
	} {
		got, err := caps.SliceMinors(tc.gpu, tc.gi, tc.ci)
		if !slices.Equal(got, tc.want) || (err == nil) != (tc.want != nil) {
			t.Errorf("gpu%d/gi%d/ci%d: %v %v, want %v", tc.gpu, tc.gi, tc.ci, got, err, tc.want)
		}
	}
	bad := MIGCaps{"config": 5, "gpu0/gi1/access": 5, "gpu0/gi1/ci0/access": 6}
	if m, err := bad.SliceMinors(0, 1, 0); err == nil {
		t.Errorf("a slice whose capability is the config one: %v, want an error", m)
	}
}

func TestParseDevice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Device
		ok   bool
	}{
		{"10:229", Device{10, 229}, true},
		{"231:*", Device{231, anyMinor}, true},
		{"231", Device{}, false},
		{"x:1", Device{}, false},
		{"1:-2", Device{}, false},
		{"5000:1", Device{}, false},
	} {
		got, err := ParseDevice(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %v %v, want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if err := (NodeDevices{Extra: []Device{{NvidiaMajor, anyMinor}}}).validate(); err == nil {
		t.Error("an extra device of NVIDIA's major is every GPU: want it refused")
	}
}
