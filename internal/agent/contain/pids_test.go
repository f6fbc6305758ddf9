package contain

import (
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodePids: two attempts whose forks together pass the node's cap
// (the parent's pids.max) fail their forks there, each within its own
// limit, while a process outside the node's jobs still forks; a parent
// made again (removed while idle) gets the cap back; a cap of 0 lifts it.
func TestNodePids(t *testing.T) {
	checkNodePids(t, needTree(t))
}

// TestNodePidsV2 is TestNodePids under cgroup v2 (see inCgroupV2). It
// needs the pids controller in the v2 hierarchy: on a machine that mounts
// v1 (this one) v1 holds it and the test is skipped in the child.
func TestNodePidsV2(t *testing.T) {
	if inCgroupV2(t) {
		return
	}
	if b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); !strings.Contains(" "+string(b)+" ", " pids") {
		t.Skipf("no pids controller in this cgroup v2 hierarchy (%q): a v1 hierarchy holds it", strings.TrimSpace(string(b)))
	}
	parent := Parent("test-node-pids", t.TempDir())
	tree, err := NewTree(parent, NodeDevices{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	checkNodePids(t, tree)
}

func checkNodePids(t *testing.T, tree *Tree) {
	const nodeCap = 40
	parentPids := func() string {
		t.Helper()
		cg, err := load(tree.Parent(), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(cg.m.Path("pids"), "pids.max"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if err := tree.LimitPids(nodeCap); err != nil {
		t.Fatal(err)
	}
	if got := parentPids(); got != fmt.Sprint(nodeCap) {
		t.Fatalf("the parent's pids.max is %q, want %d", got, nodeCap)
	}

	// a: 30 sleeps, under its own limit (32) and the node's. b, with no
	// limit of its own, then tries 30 more: only the node's room is left.
	script := `i=0; while [ $i -lt 30 ]; do sleep 60 & i=$((i+1)); done 2>/dev/null`
	specs := map[string]Spec{"a": {Pids: 32, NodePids: nodeCap}, "b": {NodePids: nodeCap}}
	alive := map[string]int{}
	var cgs []*Cgroup
	for _, name := range []string{"a", "b"} {
		cg, err := tree.Open(NameOf(name, 0, 0), specs[name])
		if err != nil {
			t.Fatal(err)
		}
		cgs = append(cgs, cg)
		defer cg.Destroy()
		cmd := startGated(t, cg, []string{"/bin/sh", "-c", script})
		cmd.Wait()
		pids, err := cg.Pids()
		if err != nil {
			t.Fatal(err)
		}
		alive[name] = len(pids)
		t.Logf("%s: %d tasks alive after its fork loop", name, len(pids))
	}
	if alive["a"] != 30 || alive["b"] == 0 || alive["b"] >= 30 || alive["a"]+alive["b"] > nodeCap {
		t.Errorf("tasks alive: a %d (want 30), b %d (want 1 to %d); together at most %d", alive["a"], alive["b"], nodeCap-30, nodeCap)
	}
	// The node keeps its pids for everything else.
	if out, err := osexec.Command("/bin/sh", "-c", "sleep 0 & wait; echo forked").CombinedOutput(); err != nil || !strings.Contains(string(out), "forked") {
		t.Errorf("a fork outside the node's jobs failed: %v %q", err, out)
	}
	for _, cg := range cgs {
		if err := cg.Destroy(); err != nil {
			t.Fatal(err)
		}
	}

	// The parent removed while idle, then made again by the next attempt:
	// the cap comes back with it.
	if err := RemoveIfEmpty(tree.Parent()); err != nil {
		t.Fatal(err)
	}
	cg, err := tree.Open(NameOf("again", 0, 0), Spec{NodePids: nodeCap})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Destroy()
	if got := parentPids(); got != fmt.Sprint(nodeCap) {
		t.Errorf("the parent made again has pids.max %q, want %d", got, nodeCap)
	}
	if err := tree.LimitPids(0); err != nil {
		t.Fatal(err)
	}
	if got := parentPids(); got != "max" {
		t.Errorf("after LimitPids(0) the parent's pids.max is %q, want max", got)
	}
}

func TestDefaultNodePids(t *testing.T) {
	for name, tc := range map[string]struct {
		pidMax, threads, loadavg string
		want                     int64
		err                      bool
	}{
		"pid_max bounds":       {"32768", "192730", "0.20 0.18 0.12 1/368 11206", (32768 - 368) * 3 / 4, false},
		"threads-max bounds":   {"4194304", "100000", "0.20 0.18 0.12 3/1000 11206", (100000 - 1000) * 3 / 4, false},
		"nearly full: 1024":    {"32768", "192730", "9.0 9.0 9.0 5/32000 11206", 1024, false},
		"no threads-max":       {"32768", "", "0 0 0 1/768 1", (32768 - 768) * 3 / 4, false},
		"a loadavg without it": {"32768", "192730", "0.20 0.18", 0, true},
		"no pid_max":           {"", "192730", "0 0 0 1/768 1", 0, true},
	} {
		t.Run(name, func(t *testing.T) {
			proc := t.TempDir()
			os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755)
			for f, v := range map[string]string{"sys/kernel/pid_max": tc.pidMax, "sys/kernel/threads-max": tc.threads, "loadavg": tc.loadavg} {
				if v != "" {
					os.WriteFile(filepath.Join(proc, f), []byte(v+"\n"), 0o644)
				}
			}
			got, err := DefaultNodePids(proc)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("DefaultNodePids = %d, %v; want %d (error: %v)", got, err, tc.want, tc.err)
			}
		})
	}
	if n, err := DefaultNodePids("/proc"); err != nil || n < minNodePids {
		t.Fatalf("on this machine: %d, %v", n, err)
	} else {
		t.Logf("on this machine: %d", n)
	}
}
