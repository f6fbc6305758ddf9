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

// needTree is a prepared tree for the test, or a skip where cgroups
// cannot be written (or are v2, where Tree.Open is Open).
// The parent is prepared before any cgroup is made under it, as the agent
// does: v1 refuses to change a cgroup's default while it has children.
func needTree(t *testing.T) *Tree {
	t.Helper()
	return needTreeWith(t, NodeDevices{})
}

// needTreeWith is needTree on a node of devices devs.
func needTreeWith(t *testing.T, devs NodeDevices) *Tree {
	t.Helper()
	if Mode() != CgroupV1 {
		t.Skip("the device allow-list is v1's")
	}
	parent := Parent("test-tree", t.TempDir())
	tree, err := NewTree(parent, devs)
	if err != nil {
		t.Skipf("cgroups cannot be resolved here: %v", err)
	}
	t.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	prepErr := tree.Prepare()
	if mode, err := Probe(parent); mode == ProcessGroup {
		t.Skipf("cgroups cannot be written here (%v)", err)
	}
	if prepErr != nil {
		t.Fatal(prepErr)
	}
	return tree
}

// fakeGPUs makes device nodes 195:0 and 195:1 in a temporary directory.
func fakeGPUs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for m := range 2 {
		if err := syscall.Mknod(filepath.Join(dir, fmt.Sprintf("nvidia%d", m)), syscall.S_IFCHR|0o666, int(NvidiaMajor<<8|m)); err != nil {
			t.Skipf("mknod: %v", err)
		}
	}
	return dir
}

// TestTreeDevices is checkDevices for an attempt's cgroup under a
// prepared parent.
func TestTreeDevices(t *testing.T) {
	tree := needTree(t)
	checkDevices(t, func(name string, gpus []int) (*Cgroup, error) {
		return tree.Open(name, Spec{MemMiB: 64, CPUs: 1, GPUMinors: gpus})
	})
}

// checkDevices proves, of cgroups made by open, that an attempt's cgroup
// gets its own GPU and not another's (EPERM), that a job without GPUs gets
// none, and that the devices every job needs still work. An allowed fake
// node fails to open all the same, but not with EPERM: ENXIO where no
// NVIDIA driver is loaded, EINVAL or ENODEV from a loaded one.
func checkDevices(t *testing.T, open func(name string, gpus []int) (*Cgroup, error)) {
	t.Helper()
	dir := fakeGPUs(t)
	script := fmt.Sprintf(`cat %[1]s/nvidia0; cat %[1]s/nvidia1
echo x > /dev/null && echo null-ok
head -c1 /dev/zero >/dev/null && echo zero-ok
head -c1 /dev/urandom >/dev/null && echo urandom-ok
exec 4<>/dev/ptmx && echo ptmx-ok
(exec 5<>/dev/tty); echo tty-done`, dir)
	for _, tc := range []struct {
		name   string
		gpus   []int
		denied []int
	}{
		{"own gpu 0", []int{0}, []int{1}},
		{"no gpus", nil, []int{0, 1}},
		{"gpus 0 and 1", []int{0, 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, err := open(NameOf("dev", len(tc.gpus), 0), tc.gpus)
			if err != nil {
				t.Fatal(err)
			}
			defer cg.Destroy()
			cmd := startGated(t, cg, []string{"/bin/sh", "-c", script})
			cmd.Wait()
			out := output(t, cmd)
			for m := range 2 {
				eperm := fmt.Sprintf("nvidia%d: Operation not permitted", m)
				if slices.Contains(tc.denied, m) != strings.Contains(out, eperm) {
					t.Errorf("GPU %d: denied %v, want %v: %q", m, strings.Contains(out, eperm), slices.Contains(tc.denied, m), out)
				}
			}
			for _, w := range []string{"null-ok", "zero-ok", "urandom-ok", "ptmx-ok", "tty-done"} {
				if !strings.Contains(out, w) {
					t.Errorf("want %q in %q", w, out)
				}
			}
			if strings.Contains(out, "/dev/tty: Operation not permitted") || !strings.Contains(out, "/dev/tty: No such device or address") { // no controlling terminal: ENXIO
				t.Errorf("/dev/tty denied: %q", out)
			}
		})
	}
}

// TestAllowRulesDifferFromParentByOwnGPUs proves an attempt's rules
// differ from its parent's by 195:* and nvidia-caps' * and its own GPUs
// and MIG capabilities alone, so that the library (which writes only the
// difference from the inherited list) makes 2 + GPUs + capabilities
// writes per attempt instead of one per denied minor.
func TestAllowRulesDifferFromParentByOwnGPUs(t *testing.T) {
	nd := NodeDevices{UVMMajor: 510, CapsMajor: 509}
	key := func(spec Spec, parent bool) map[string]bool {
		m := map[string]bool{}
		for _, r := range allowRules(spec, parent) {
			m[r.CgroupString()] = true
		}
		return m
	}
	parent := key(Spec{Devices: nd}, true)
	child := key(Spec{Devices: nd, GPUMinors: []int{2, 5}, CapMinors: []int64{30, 31}}, false)
	var gone, added []string
	for r := range parent {
		if !child[r] {
			gone = append(gone, r)
		}
	}
	for r := range child {
		if !parent[r] {
			added = append(added, r)
		}
	}
	slices.Sort(gone)
	slices.Sort(added)
	if !slices.Equal(gone, []string{"c 195:* rwm", "c 509:* rwm"}) ||
		!slices.Equal(added, []string{"c 195:2 rwm", "c 195:5 rwm", "c 509:30 rwm", "c 509:31 rwm"}) {
		t.Fatalf("child differs from parent by -%v +%v", gone, added)
	}
	for _, want := range []string{"b *:* m", "c *:* m", "c 1:3 rwm", "c 5:2 rwm", "c 136:* rwm", "c 143:* rwm",
		"c 195:254 rwm", "c 195:255 rwm", "c 510:0 rwm", "c 510:1 rwm"} {
		if !child[want] {
			t.Errorf("child lacks %q", want)
		}
	}
	for _, no := range []string{"c 195:* rwm", "c 195:0 rwm", "a *:* rwm", "b *:* rwm", "c 1:1 rwm", "c 1:* rwm", "c 10:* rwm", "c 509:* rwm"} {
		if child[no] {
			t.Errorf("child allows %q", no)
		}
	}
}

// TestTreeOpenWithoutPreparedList proves the attempts whose device rules
// go through the library instead (a cgroup taken over as it is, a parent
// removed and made again allow-all) are held to the same rules: their own
// GPU, not another's.
func TestTreeOpenWithoutPreparedList(t *testing.T) {
	tree := needTree(t)
	dir := fakeGPUs(t)
	check := func(t *testing.T, cg *Cgroup) {
		t.Helper()
		cmd := startGated(t, cg, []string{"/bin/sh", "-c", fmt.Sprintf(`cat %[1]s/nvidia0; cat %[1]s/nvidia1; echo x > /dev/null && echo null-ok`, dir)})
		cmd.Wait()
		out := output(t, cmd)
		for _, w := range []string{"nvidia0: No such device or address", "nvidia1: Operation not permitted", "null-ok"} {
			if !strings.Contains(out, w) {
				t.Errorf("want %q in %q", w, out)
			}
		}
	}
	spec := Spec{GPUMinors: []int{0}}
	t.Run("taken over", func(t *testing.T) {
		first, err := tree.Open(NameOf("over", 0, 0), spec)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Destroy()
		again, err := tree.Open(NameOf("over", 0, 0), spec)
		if err != nil {
			t.Fatal(err)
		}
		check(t, again)
	})
	t.Run("parent made again", func(t *testing.T) {
		if err := RemoveIfEmpty(tree.Parent()); err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // the first makes the parent again, allow-all; the second is made under it
			cg, err := tree.Open(NameOf("again", i, 0), spec)
			if err != nil {
				t.Fatal(err)
			}
			check(t, cg)
			cg.Destroy()
		}
	})
}

// TestTreeCPUOnlyWithQuota: an attempt's cgroup is made in the cpu
// hierarchy where it has a CPU limit (and holds it), and not otherwise.
func TestTreeCPUOnlyWithQuota(t *testing.T) {
	tree := needTree(t)
	none, err := tree.Open(NameOf("nocpu", 0, 0), Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Destroy()
	if p := none.m.Path("cpu"); p != "" {
		t.Errorf("no CPU limit, yet a cpu cgroup: %s", p)
	}
	capped, err := tree.Open(NameOf("cpu", 0, 0), Spec{CPUs: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Destroy()
	b, err := os.ReadFile(filepath.Join(capped.m.Path("cpu"), "cpu.cfs_quota_us"))
	if err != nil || strings.TrimSpace(string(b)) != "150000" {
		t.Errorf("cpu.cfs_quota_us %q (%v), want 150000", b, err)
	}
}

// TestTreePidsCapsForks: an attempt with a task limit cannot fork past it
// (its forks fail, the node's pids stay free), and one without a limit is
// not made in the pids hierarchy at all.
func TestTreePidsCapsForks(t *testing.T) {
	tree := needTree(t)
	none, err := tree.Open(NameOf("nopids", 0, 0), Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Destroy()
	if p := none.m.Path("pids"); p != "" {
		t.Errorf("no task limit, yet a pids cgroup: %s", p)
	}

	const limit = 16
	cg, err := tree.Open(NameOf("pids", 0, 0), Spec{Pids: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Destroy()
	if b, err := os.ReadFile(filepath.Join(cg.m.Path("pids"), "pids.max")); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(limit) {
		t.Fatalf("pids.max %q (%v), want %d", b, err, limit)
	}
	// 64 background sleeps: past the limit the shell's forks fail. The
	// shell counts its successes and reports before it exits.
	script := `n=0; for i in $(seq 64); do sleep 60 & if [ $? -eq 0 ]; then n=$((n+1)); fi; done 2>/dev/null; echo "alive $(jobs -p | wc -l)"`
	cmd := startGated(t, cg, []string{"/bin/sh", "-c", script})
	cmd.Wait()
	pids, err := cg.Pids()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) == 0 || len(pids) >= limit {
		t.Errorf("%d tasks in the cgroup after the fork loop; want some, fewer than %d (output %q)", len(pids), limit, output(t, cmd))
	}
	if err := cg.Kill(); err != nil {
		t.Fatal(err)
	}
	if pids, _ := cg.Pids(); len(pids) != 0 {
		t.Errorf("%d tasks left after Kill", len(pids))
	}
}
