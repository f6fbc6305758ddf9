package contain

import (
	"errors"
	"fmt"
	"math"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needCgroups skips a test where cgroups cannot be written.
func needCgroups(t *testing.T) string {
	t.Helper()
	parent := Parent("test-node", t.TempDir())
	mode, err := Probe(parent)
	if mode == ProcessGroup {
		t.Skipf("cgroups cannot be written here (%v): containment falls back to process groups", err)
	}
	t.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	return parent
}

// startGated starts argv in cg the way the agent does: gated, added, released.
func startGated(t *testing.T, cg *Cgroup, argv []string) *osexec.Cmd {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	g := Gate(argv)
	cmd := osexec.Command(g[0], g[1:]...)
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out // a file: escapees that keep it open do not hold up Wait
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := cg.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := Release(w); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		ok   bool
	}{
		{Spec{}, true},
		{Spec{MemMiB: 1024, CPUs: 2.5, GPUMinors: []int{0, 7}}, true},
		{Spec{MemMiB: -1}, false},
		{Spec{CPUs: -1}, false},
		{Spec{CPUs: math.NaN()}, false},
		{Spec{CPUs: 1e9}, false},
		{Spec{GPUMinors: []int{254}}, false},
		{Spec{GPUMinors: []int{-1}}, false},
	} {
		if err := tc.spec.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}

func TestNames(t *testing.T) {
	name := NameOf("01JOB", 2, 1)
	job, attempt, ok := ParseName(name)
	if !ok || job != "01JOB" || attempt != "2" {
		t.Fatalf("ParseName(%q) = %q %q %v", name, job, attempt, ok)
	}
	if a, b := Parent("n1", "x"), Parent("n1", "y"); a == b || !strings.HasPrefix(a, "corral/n1-") {
		t.Fatalf("Parent: %q %q", a, b)
	}
	if p := Parent("../../etc", "x"); strings.Contains(p, "..") && !strings.HasPrefix(p, "corral/_") {
		t.Fatalf("Parent kept a path escape: %q", p)
	}
}

// TestDevicesDenyOtherGPUs makes fake GPU device nodes (195:0 and 195:1)
// and proves that a job holding GPU 0 cannot open GPU 1's node (EPERM from
// the device controller) while it can open its own (ENXIO: no driver
// behind the fake node), and that /dev/null still works.
func TestDevicesDenyOtherGPUs(t *testing.T) {
	parent := needCgroups(t)
	checkDevices(t, func(name string, gpus []int) (*Cgroup, error) {
		return Open(filepath.Join(parent, name), Spec{GPUMinors: gpus})
	})
}

// TestDevicesDenyOtherGPUsV2 is TestDevicesDenyOtherGPUs under cgroup v2,
// where the rules are deviceFilter's eBPF program: on a v2 machine here,
// elsewhere (as root) in a child process that sees a v2 hierarchy at
// /sys/fs/cgroup. A cgroup taken over with other GPUs (an adopted
// attempt's, made again) has the new rules in place of the old.
func TestDevicesDenyOtherGPUsV2(t *testing.T) {
	if inCgroupV2(t) {
		return
	}
	parent := Parent("test-node", t.TempDir())
	t.Cleanup(func() {
		Sweep(parent, func(string) bool { return false })
		Remove(parent)
	})
	checkDevices(t, func(name string, gpus []int) (*Cgroup, error) {
		return Open(filepath.Join(parent, name), Spec{GPUMinors: gpus})
	})
	dir := fakeGPUs(t)
	path := filepath.Join(parent, NameOf("takeover", 0, 0))
	cg, err := Open(path, Spec{GPUMinors: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Destroy()
	again, err := Open(path, Spec{GPUMinors: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if n := attachedDeviceFilters(t, again); n != 1 {
		t.Errorf("%d device programs on the cgroup taken over, want 1", n)
	}
	// Read, then write: the filter must tell the device's type from the
	// access asked for (both in one field).
	cmd := startGated(t, again, []string{"/bin/sh", "-c", fmt.Sprintf(`cat %[1]s/nvidia0; cat %[1]s/nvidia1; echo x >%[1]s/nvidia0`, dir)})
	cmd.Wait()
	out := output(t, cmd)
	if !strings.Contains(out, "cat: "+dir+"/nvidia0: Operation not permitted") || strings.Contains(out, "nvidia1: Operation not permitted") ||
		!strings.Contains(out, "cat: "+dir+"/nvidia1: ") || strings.Count(out, "nvidia0: Operation not permitted") != 2 {
		t.Errorf("taken over with GPU 1: want GPU 0 denied to read and write and GPU 1 open, got %q", out)
	}
}

// TestDestroyKillsEscapees proves that what a job forks out of its
// process group and session (setsid, double fork, nohup) dies with its
// cgroup, and that the cgroup is removed.
func TestDestroyKillsEscapees(t *testing.T) {
	parent := needCgroups(t)
	cg, err := Open(filepath.Join(parent, NameOf("esc", 0, 0)), Spec{MemMiB: 256, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pids")
	script := fmt.Sprintf(`setsid sh -c 'echo $$ >> %[1]s; exec sleep 1000' & (sh -c 'echo $$ >> %[1]s; exec sleep 1000' &) ; nohup sh -c 'echo $$ >> %[1]s; exec sleep 1000' >/dev/null 2>&1 & sleep 0.2`, pidFile)
	cmd := startGated(t, cg, []string{"/bin/sh", "-c", script})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job: %v (%s)", err, output(t, cmd))
	}
	pids := waitPids(t, pidFile, 3)
	for _, p := range pids {
		if syscall.Kill(p, 0) != nil {
			t.Fatalf("pid %d gone before the kill: the test proves nothing", p)
		}
	}
	if err := cg.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d survived its cgroup", p)
		}
	}
	if _, err := load(cg.Path(), nil); err == nil && cg.m.Exists() {
		t.Errorf("cgroup %s still exists", cg.Path())
	}
}

// TestSweepKeepsOnlyClaimed proves Sweep removes unclaimed attempts'
// cgroups with their processes and spares the claimed ones.
func TestSweepKeepsOnlyClaimed(t *testing.T) {
	parent := needCgroups(t)
	mk := func(name string) (*Cgroup, *osexec.Cmd) {
		cg, err := Open(filepath.Join(parent, name), Spec{})
		if err != nil {
			t.Fatal(err)
		}
		return cg, startGated(t, cg, []string{"/bin/sh", "-c", "exec sleep 1000"})
	}
	keepCg, keepCmd := mk(NameOf("keep", 0, 0))
	_, goneCmd := mk(NameOf("gone", 1, 0))
	defer keepCg.Destroy()
	removed, err := Sweep(parent, func(name string) bool {
		job, _, _ := ParseName(name)
		return job == "keep"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != NameOf("gone", 1, 0) {
		t.Fatalf("removed %v", removed)
	}
	goneCmd.Wait()
	if !alive(keepCmd.Process.Pid) {
		t.Fatal("the kept attempt was killed")
	}
}

// output is what a command started by startGated wrote.
func output(t *testing.T, cmd *osexec.Cmd) string {
	b, err := os.ReadFile(cmd.Stdout.(*os.File).Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitPids(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			var p int
			fmt.Sscan(f, &p)
			pids = append(pids, p)
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("got pids %v, want %d", pids, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestGateShell proves a gated shell command runs nothing before it is
// released (and nothing at all when the gate's pipe closes unwritten),
// and, released, keeps its $0, its empty positional parameters and its
// exit status, whether its own shell is the gate or the gate execs argv.
func TestGateShell(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv func(marker string) []string
	}{
		{"shell command", func(m string) []string {
			return []string{"/bin/sh", "-c", fmt.Sprintf(`touch %s; echo "zero=$0 n=$#"; exit 7`, m)}
		}},
		{"other argv", func(m string) []string {
			return []string{"/bin/sh", "-c", fmt.Sprintf(`touch %s; echo "zero=$0 n=$#"; exit 7`, m), "/bin/sh"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, release := range []bool{false, true} {
				marker := filepath.Join(t.TempDir(), "ran")
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				g := Gate(tc.argv(marker))
				cmd := osexec.Command(g[0], g[1:]...)
				cmd.ExtraFiles = []*os.File{r}
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				r.Close()
				if release {
					err = Release(w)
				} else {
					err = w.Close()
				}
				if err != nil {
					t.Fatal(err)
				}
				cmd.Wait()
				code := cmd.ProcessState.ExitCode()
				_, statErr := os.Stat(marker)
				switch {
				case !release && (code != 126 || statErr == nil):
					t.Errorf("gate closed: exit %d, ran: %v; want 126 and nothing run", code, statErr == nil)
				case release && (code != 7 || statErr != nil || !strings.Contains(out.String(), "zero=/bin/sh n=0")):
					t.Errorf("released: exit %d, ran: %v, out %q; want 7, run, zero=/bin/sh n=0", code, statErr == nil, out.String())
				}
			}
		})
	}
	if g := Gate([]string{"/bin/sh", "-c", "true"}); len(g) != 3 {
		t.Errorf("a shell command is not gated by its own shell: %q", g)
	}
}

// RemoveUnused leaves a parent that has a cgroup under it (another
// agent's job, not yet admitted) and removes it once it has none.
func TestRemoveUnused(t *testing.T) {
	parent := needCgroups(t)
	child, err := Open(filepath.Join(parent, NameOf("j", 0, 0)), Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveUnused(parent); err == nil {
		t.Error("a parent with a cgroup under it was removed")
	}
	if err := child.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := RemoveUnused(parent); err != nil {
		t.Fatalf("an unused parent: %v", err)
	}
	if err := RemoveUnused(parent); err != nil {
		t.Errorf("a parent removed already: %v", err)
	}
	cg, err := load(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	for h, dir := range cg.m.GetPaths() {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: %s still there (%v)", h, dir, err)
		}
	}
}
