package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Jobs in container images, run by `corral up` as root
// through the node's Podman. Registries are unreachable here, so the
// test builds its image: busybox-static from Debian's archive, imported
// with podman import.

// testImage builds a local image (a busybox rootfs) and returns its
// name; it is removed at the test's end. It skips where podman is
// missing, the test is not root, or busybox-static cannot be had.
func testImage(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("container image tests need root: the agent runs podman as root and the container as the job's account")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("container image tests need podman (apt-get install podman)")
	}
	dir := t.TempDir()
	dl := exec.Command("apt-get", "download", "busybox-static")
	dl.Dir = dir
	if out, err := dl.CombinedOutput(); err != nil {
		t.Skipf("busybox-static for the test image cannot be had (apt-get download): %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "busybox-static*.deb"))
	if len(debs) == 0 {
		t.Skip("apt-get download busybox-static left no package")
	}
	root := filepath.Join(dir, "root")
	script := fmt.Sprintf(`set -e
dpkg-deb -x %s %s
cd %s
for a in sh id cat sleep ls touch echo env grep cut head pwd stat; do ln -sf busybox bin/$a; done
mkdir -p tmp etc proc sys dev
chmod 1777 tmp`, shellQuote(debs[0]), shellQuote(root), shellQuote(root))
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("test image rootfs: %v\n%s", err, out)
	}
	name := fmt.Sprintf("localhost/corral-e2e-%d:1", os.Getpid())
	imp := exec.Command("/bin/sh", "-c", "tar -C "+shellQuote(root)+" -c . | podman import - "+name)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", name).Run() })
	return name
}

// testAccount makes a Unix account with a home under the system's
// temporary directory and returns it; it is removed at the test's end.
func testAccount(t *testing.T) *user.User {
	t.Helper()
	name := fmt.Sprintf("cimg%d", os.Getpid()%100000)
	home := filepath.Join(os.TempDir(), "corral-home-"+name)
	os.Chmod(os.TempDir(), 0o1777)
	if out, err := exec.Command("useradd", "--create-home", "--home-dir", home, "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Skipf("useradd: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("userdel", name).Run()
		os.RemoveAll(home)
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// containerPIDs are the host pids of a running container's init and of
// its conmon, by the container's name.
func containerPIDs(t *testing.T, name string) []int {
	t.Helper()
	out, err := exec.Command("podman", "inspect", "--format", "{{.State.Pid}} {{.State.ConmonPid}}", name).Output()
	if err != nil {
		t.Fatalf("podman inspect %s: %v", name, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("podman inspect %s: %q", name, out)
	}
	return pids
}

// podmanHas reports whether podman lists a container of that name.
func podmanHas(name string) bool {
	out, _ := exec.Command("podman", "ps", "--all", "--filter", "name=^"+name+"$", "--format", "{{.Names}}").Output()
	return strings.TrimSpace(string(out)) != ""
}

func TestImageJobs(t *testing.T) {
	img := testImage(t)
	acct := testAccount(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "4", "--node-name", "image-node", "--run-as", "user")
	if mode := s.cluster().Nodes[0].Containment; !strings.HasPrefix(mode, "cgroup-") {
		t.Skipf("the node's containment is %q, not a cgroup", mode)
	}
	data, err := os.MkdirTemp("/tmp", "corral-img-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	os.Chmod(data, 0o755)
	os.WriteFile(filepath.Join(data, "hello"), []byte("hello from the host\n"), 0o644)
	out := filepath.Join(acct.HomeDir, "out")
	os.Mkdir(out, 0o755)
	uid, _ := strconv.Atoi(acct.Uid)
	gid, _ := strconv.Atoi(acct.Gid)
	os.Chown(out, uid, gid)

	t.Run("identity, cgroup, GPUs, mounts, digest", func(t *testing.T) {
		s := s.on(t)
		cmd := `echo "uid=$(id -u) gid=$(id -g)"
echo "pids-cgroup=$(grep ':pids:' /proc/self/cgroup | cut -d: -f3)"
echo "cvd=$CUDA_VISIBLE_DEVICES"
echo "pwd=$(pwd) home=$HOME"
cat /data/hello
touch /data/x 2>/dev/null && echo ro-broken || echo ro-ok
echo written > /out/file && echo rw-ok`
		j := s.submit(map[string]any{"user": acct.Username, "gpu_count": 2, "workdir": acct.HomeDir, "image": img,
			"mounts": []string{data + ":/data:ro", out + ":/out"}, "command": cmd})
		j = s.waitTerminal(j.ID, 60*time.Second)
		log := s.logs(j.ID)
		if j.State != api.StateCompleted {
			t.Fatalf("job ended %s (%s: %s); log:\n%s", j.State, j.Reason, j.Message, log)
		}
		var gpus []string
		for _, a := range j.Allocation {
			gpus = append(gpus, strconv.Itoa(a.GPUID))
		}
		for _, want := range []string{
			"uid=" + acct.Uid + " gid=" + acct.Gid,
			"/" + j.ID + ".0.0\n", // the pids cgroup line ends with the attempt's cgroup
			"cvd=" + strings.Join(gpus, ",") + "\n",
			"pwd=" + acct.HomeDir + " home=" + acct.HomeDir + "\n",
			"hello from the host", "ro-ok", "rw-ok",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("the log lacks %q:\n%s", want, log)
			}
		}
		if fi, err := os.Stat(filepath.Join(out, "file")); err != nil {
			t.Errorf("the container's write to a rw mount is not on the host: %v", err)
		} else if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			t.Errorf("the container's file is owned by %+v, want the account's uid %d", fi.Sys(), uid)
		}
		if !strings.HasPrefix(j.ImageDigest, strings.Split(img, ":")[0]+"@sha256:") {
			t.Errorf("image_digest %q, want %s@sha256:…", j.ImageDigest, strings.Split(img, ":")[0])
		}
		show, _, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "show", j.ID)
		if code != 0 || !strings.Contains(show, "Image digest:") || !strings.Contains(show, j.ImageDigest) {
			t.Errorf("corral show does not show the image digest:\n%s", show)
		}
		waitFor(t, 10*time.Second, func() string { return "the ended job's container to be removed" },
			func() bool { return !podmanHas("corral-" + j.ID + ".0.0") })
	})

	t.Run("cancel mid-run leaves nothing", func(t *testing.T) {
		s := s.on(t)
		j := s.submit(map[string]any{"user": acct.Username, "gpu_count": 1, "workdir": acct.HomeDir, "image": img,
			"command": `echo started; sleep 600 & sleep 601; echo never`})
		s.waitState(j.ID, api.StateRunning, 30*time.Second)
		name := "corral-" + j.ID + ".0.0"
		waitFor(t, 20*time.Second, func() string { return "the job's container to run" }, func() bool {
			return strings.Contains(s.logs(j.ID), "started") && podmanHas(name)
		})
		pids := containerPIDs(t, name)
		for _, p := range pids {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
			if !strings.Contains(string(b), "/"+j.ID+".0.0\n") {
				t.Errorf("container process %d is not in the job's cgroup:\n%s", p, b)
			}
		}
		if r := s.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil); r.Status != 200 && r.Status != 202 {
			t.Fatalf("cancel: %s", r)
		}
		got := s.waitTerminal(j.ID, 30*time.Second)
		if got.State != api.StateCanceled {
			t.Errorf("job ended %s (%s), want canceled", got.State, got.Message)
		}
		waitGone(t, pids, "the cancel")
		waitFor(t, 10*time.Second, func() string { return "the canceled job's container to be removed (podman ps -a)" },
			func() bool { return !podmanHas(name) })
	})

	t.Run("an image that cannot be had fails start_failed", func(t *testing.T) {
		s := s.on(t)
		ref := "docker.io/corral-e2e/no-such-image:1"
		j := s.submit(map[string]any{"user": acct.Username, "gpu_count": 1, "workdir": acct.HomeDir, "image": ref, "command": "true"})
		j = s.waitTerminal(j.ID, 60*time.Second)
		if j.State != api.StateFailed || j.Reason != api.ReasonStartFailed || !strings.Contains(j.Message, ref+" cannot be had") {
			t.Errorf("job ended %s (%s: %s); want failed start_failed naming the image", j.State, j.Reason, j.Message)
		}
		if j.StartedAt != nil {
			t.Errorf("the job's clock started (%v) although its image never came", j.StartedAt)
		}
		if log := s.logs(j.ID); !strings.Contains(log, "pulling image "+ref) {
			t.Errorf("the log does not say the image was being pulled:\n%s", log)
		}
	})

	t.Run("a mount the account cannot open is refused", func(t *testing.T) {
		s := s.on(t)
		private := filepath.Join(data, "private")
		os.Mkdir(private, 0o700)
		j := s.submit(map[string]any{"user": acct.Username, "gpu_count": 0, "workdir": acct.HomeDir, "image": img,
			"mounts": []string{private + ":/p:ro"}, "command": "ls /p"})
		j = s.waitTerminal(j.ID, 60*time.Second)
		if j.State != api.StateFailed || j.Reason != api.ReasonStartFailed || !strings.Contains(j.Message, "cannot read") {
			t.Errorf("job ended %s (%s: %s); want failed start_failed (the account cannot read the source)", j.State, j.Reason, j.Message)
		}
	})
}
