package contain

import (
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// v2ChildEnv marks the child process inCgroupV2 runs a test in.
const v2ChildEnv = "CORRAL_TEST_CGROUP_V2_CHILD"

// inCgroupV2 lets a test run under cgroup v2 on a machine that mounts v1.
// On a v2 machine it returns false: the test goes on here. Elsewhere it
// runs the test again in a child process with a mount namespace of its own
// (Go makes its mounts private), where cgroup2 is mounted at
// /sys/fs/cgroup, reports the child's result as the test's, and returns
// true: the caller returns. The child's v2 hierarchy has no controllers
// that v1 holds (memory, cpu, pids): only specs without limits work there,
// but the device rules do, as eBPF programs need none. Skips where the
// child cannot be made (not root).
func inCgroupV2(t *testing.T) bool {
	t.Helper()
	if os.Getenv(v2ChildEnv) == "1" {
		if Mode() != CgroupV2 {
			t.Fatal("the child does not see cgroup v2")
		}
		return false
	}
	if Mode() == CgroupV2 {
		return false
	}
	if os.Geteuid() != 0 {
		t.Skip("cgroup v2 is not mounted here, and only root can mount it for the test")
	}
	cmd := osexec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), v2ChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	t.Logf("in a mount namespace with cgroup v2 at /sys/fs/cgroup:\n%s", out)
	switch {
	case err != nil:
		t.Fatalf("under cgroup v2: %v", err)
	case strings.Contains(string(out), "--- SKIP"):
		t.Skip("skipped under cgroup v2")
	}
	return true
}

// TestMain mounts cgroup2 at /sys/fs/cgroup in inCgroupV2's child before
// any test (or the library, which reads the mode once) looks at it.
func TestMain(m *testing.M) {
	if os.Getenv(v2ChildEnv) == "1" {
		if err := syscall.Mount("none", "/sys/fs/cgroup", "cgroup2", 0, ""); err != nil {
			os.Stderr.WriteString("--- SKIP: cannot mount cgroup2: " + err.Error() + "\n")
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// attachedDeviceFilters counts the device programs attached to cg (v2).
func attachedDeviceFilters(t *testing.T, cg *Cgroup) int {
	t.Helper()
	fd, err := unix.Open(cg.m.Path(""), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	q, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: ebpf.AttachCGroupDevice})
	if err != nil {
		t.Fatal(err)
	}
	return len(q.Programs)
}
