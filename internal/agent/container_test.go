package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// fakeGPUNodes makes character devices 195:m named nvidiaM (and the
// driver's shared nodes) in a temporary directory; it skips where mknod
// is not allowed.
func fakeGPUNodes(t *testing.T, minors ...int) string {
	t.Helper()
	dir := t.TempDir()
	mk := func(name string, minor int) {
		if err := syscall.Mknod(filepath.Join(dir, name), syscall.S_IFCHR|0o666, 195<<8|minor); err != nil {
			t.Skipf("mknod of a fake GPU device: %v", err)
		}
	}
	for _, m := range minors {
		mk(fmt.Sprintf("nvidia%d", m), m)
	}
	mk("nvidiactl", 255)
	return dir
}

// A container gets exactly its task's GPUs: their device nodes (by
// minor) and the driver's shared nodes where present, or CDI names where
// the node has an NVIDIA CDI spec; nothing for a task without GPUs.
func TestGPUDevices(t *testing.T) {
	dev := fakeGPUNodes(t, 0, 1, 2, 3, 7)
	os.WriteFile(filepath.Join(dev, "nvidia-uvm"), nil, 0o666) // not a device: skipped
	cdi := t.TempDir()
	os.WriteFile(filepath.Join(cdi, "nvidia.yaml"), []byte("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n"), 0o644)
	for _, c := range []struct {
		name   string
		gpus   []int
		minors map[int]int
		cdi    []string
		want   []string
	}{
		{"device nodes", []int{1, 3}, nil, nil, []string{dev + "/nvidia1:/dev/nvidia1", dev + "/nvidia3:/dev/nvidia3", dev + "/nvidiactl:/dev/nvidiactl"}},
		{"minors differ from indexes", []int{0}, map[int]int{0: 7}, nil, []string{dev + "/nvidia7:/dev/nvidia7", dev + "/nvidiactl:/dev/nvidiactl"}},
		{"simulated GPU without a node", []int{5}, nil, nil, []string{dev + "/nvidiactl:/dev/nvidiactl"}},
		{"CDI", []int{2, 0}, nil, []string{t.TempDir(), cdi}, []string{"nvidia.com/gpu=2", "nvidia.com/gpu=0"}},
		{"no GPUs", nil, nil, []string{cdi}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := gpuDevices(c.gpus, c.minors, dev, c.cdi); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestDriverLibraries(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "libcuda.so.550.54")
	os.WriteFile(real, nil, 0o644)
	os.Symlink(real, filepath.Join(dir, "libcuda.so.1"))
	cache := fmt.Sprintf(`3 libs found in cache `+"`/etc/ld.so.cache'"+`
	libcuda.so.1 (libc6,x86-64) => %s/libcuda.so.1
	libc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
	libnvidia-ml.so.1 (libc6,x86-64) => %s/libnvidia-ml.so.1
`, dir, dir)
	got := driverLibraries([]byte(cache))
	want := []string{filepath.Join(dir, "libcuda.so.1"), real, filepath.Join(dir, "libnvidia-ml.so.1")}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The image's own variables and PATH keep the image's values, Corral's
// are the job's; a value the env file cannot carry is left out.
func TestContainerEnv(t *testing.T) {
	env := []string{"PATH=/root/go/bin:/usr/bin", "LD_LIBRARY_PATH=/opt/host", "HF_HOME=/data/hf", "CUDA_VISIBLE_DEVICES=1,3",
		"CORRAL_JOB_ID=j1", "HOME=/home/ana", "BASH_FUNC_module%%=() {\n echo hi\n}", "A B=x"}
	got := containerEnv(env, []string{"PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "HOME"}, io.Discard)
	want := []string{"HF_HOME=/data/hf", "CUDA_VISIBLE_DEVICES=1,3", "CORRAL_JOB_ID=j1", "HOME=/home/ana"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A job may bind only what its account could open: podman, as root,
// binds whatever it is told.
func TestCanReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files owned by another account")
	}
	root, err := os.MkdirTemp("/tmp", "corral-reach-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	private := filepath.Join(root, "private")
	os.Mkdir(private, 0o700)
	inside := filepath.Join(private, "data")
	os.Mkdir(inside, 0o755)
	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o755)
	group := filepath.Join(root, "group")
	os.Mkdir(group, 0o750)
	os.Chown(group, 0, 4242)
	ana := &credential{uid: 4242, gid: 4242}
	bob := &credential{uid: 4343, gid: 4343}
	for _, c := range []struct {
		path string
		cred *credential
		ok   bool
	}{
		{open, ana, true},
		{inside, ana, false}, // under a directory only root may enter
		{private, ana, false},
		{group, ana, true}, // its group's
		{group, bob, false},
		{inside, nil, true}, // the agent's own account
	} {
		err := canReach(c.path, c.cred)
		if (err == nil) != c.ok {
			t.Errorf("canReach(%s, %v): %v, want ok=%v", c.path, c.cred, err, c.ok)
		}
	}
}

// The mounts of a task: workdir and home at their paths, the notice's
// directory read-only, the job's own; a mount the account cannot reach is
// refused.
func TestJobMounts(t *testing.T) {
	wd, home, data := t.TempDir(), t.TempDir(), t.TempDir()
	notice := filepath.Join(t.TempDir(), "notice")
	spec := api.TaskSpec{Mounts: []string{data + ":/data:ro", wd + ":/work"}}
	got, err := jobMounts(spec, &credential{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()), home: home}, wd, notice, "")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, m := range got {
		args = append(args, m.arg())
	}
	want := []string{wd + ":" + wd, home + ":" + home, filepath.Dir(notice) + ":" + filepath.Dir(notice) + ":ro", data + ":/data:ro", wd + ":/work"}
	if !slices.Equal(args, want) {
		t.Errorf("got %q, want %q", args, want)
	}
	if _, err := jobMounts(api.TaskSpec{Mounts: []string{"/nonexistent-corral:/x"}}, nil, "", "", ""); err == nil {
		t.Error("a mount of a missing directory was taken")
	}
}

// podman run's flags: the container stays in the caller's cgroup, is
// removed, runs as the job's account with its groups, its devices and
// mounts, and the job's command under bash where the image has it.
func TestPodmanArgs(t *testing.T) {
	p := containerPlan{name: "corral-j1.0.0", imageID: "abc", command: "python train.py", workdir: "/home/ana/proj",
		cred:    &credential{uid: 1001, gid: 1001, groups: []uint32{1001, 27}},
		mounts:  []mountSpec{{src: "/data", dst: "/data", ro: true}},
		devices: []string{"/dev/nvidia1:/dev/nvidia1"}, envFile: "/state/x.env", nofile: [2]uint64{1024, 4096}, nproc: [2]uint64{100, 200},
		globalPre: []string{"--runtime", "/state/container/crun"}}
	got := strings.Join(p.podmanArgs(), " ")
	for _, want := range []string{"--runtime /state/container/crun run --rm --name corral-j1.0.0 --init --pull=never --cgroups=disabled",
		"--user 1001:1001 --group-add 27 --workdir /home/ana/proj", "--volume /data:/data:ro", "--device /dev/nvidia1:/dev/nvidia1",
		"--env-file /state/x.env", "--ulimit nofile=1024:4096 --ulimit nproc=100:200", "abc /bin/sh -c", "corral-job python train.py"} {
		if !strings.Contains(got, want) {
			t.Errorf("podman args lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "--group-add 1001") {
		t.Errorf("the primary group is added again:\n%s", got)
	}
}

// fakePodman puts a podman on PATH that holds every pull until the file
// DIR/go exists (or fails it with DIR/fail), describes any image, and
// runs a container by running its command with the host's sh.
func fakePodman(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
while [ "${1#--}" != "$1" ]; do shift 2; done   # global flags (--runtime X)
case "$1" in
image) case "$2" in
  exists) exit 1 ;;
  inspect) echo '[{"Id":"abc123","RepoDigests":["localhost/fake@sha256:feed"],"Config":{"Env":["PATH=/image/bin"]}}]' ;;
  esac ;;
pull) echo "Trying to pull $2..."
  i=0; while [ ! -e ` + dir + `/go ] && [ ! -e ` + dir + `/fail ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done
  [ -e ` + dir + `/fail ] && { echo "Error: no such host" >&2; exit 125; }
  echo "Writing manifest to image destination" ;;
rm) exit 0 ;;
run) for last; do :; done; exec /bin/sh -c "$last" ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "podman"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return dir
}

// A task with an image is reported preparing while its image is pulled
// (no start time: the job's clock has not started), then runs, reporting
// the image's digest; the pull's progress is in the job's log.
func TestImageTaskPreparesThenRuns(t *testing.T) {
	fake := fakePodman(t)
	dir := t.TempDir()
	ts := newTasks(t, dir, 0)
	ts.detach = false // the job runs as the agent's child: podman's fixed environment would not make this test binary a shim
	ts.images = &images{stateDir: ts.stateDir, devDir: t.TempDir()}
	os.MkdirAll(ts.stateDir, 0o755)
	ts.start(api.TaskSpec{JobID: "j1", Image: "docker.io/fake:1", Command: "echo ran-in-image"})
	st := waitTask(t, ts, "the task to prepare", func(s api.TaskStatus) bool { return s.State == api.TaskPreparing })
	if st.StartedAt != nil {
		t.Errorf("a preparing task has a start time: %+v", st)
	}
	os.WriteFile(filepath.Join(fake, "go"), nil, 0o644)
	st = waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 0 || st.Error != "" || st.ImageDigest != "localhost/fake@sha256:feed" || st.StartedAt == nil {
		t.Errorf("status %+v; want exit 0, digest localhost/fake@sha256:feed, a start time", st)
	}
	b, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0}))
	for _, want := range []string{"corral: pulling image docker.io/fake:1\n", "Trying to pull docker.io/fake:1", "ran-in-image\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("log lacks %q:\n%s", want, b)
		}
	}
}

// A task stopped while its image is pulled ends unstarted, as if SIGTERM
// had ended it, without waiting for the pull; one whose pull fails ends
// with the reason.
func TestImageTaskStoppedOrFailedWhilePreparing(t *testing.T) {
	for _, c := range []struct {
		name  string
		act   func(ts *tasks, fake string)
		check func(t *testing.T, st api.TaskStatus)
	}{
		{"stopped", func(ts *tasks, _ string) { ts.stop(taskKey{"j1", 0, 0}, 5*time.Second, "") }, func(t *testing.T, st api.TaskStatus) {
			if st.Signal != "terminated" || st.ExitCode != 143 || st.Error != "" {
				t.Errorf("status %+v; want ended by SIGTERM", st)
			}
		}},
		{"pull fails", func(_ *tasks, fake string) { os.WriteFile(filepath.Join(fake, "fail"), nil, 0o644) }, func(t *testing.T, st api.TaskStatus) {
			if st.ExitCode != -1 || !strings.Contains(st.Error, "docker.io/fake:1 cannot be had on this node: no such host") {
				t.Errorf("status %+v; want an error naming the image and the reason", st)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := fakePodman(t)
			ts := newTasks(t, t.TempDir(), 0)
			ts.images = &images{stateDir: ts.stateDir, devDir: t.TempDir()}
			os.MkdirAll(ts.stateDir, 0o755)
			ts.start(api.TaskSpec{JobID: "j1", Image: "docker.io/fake:1", Command: "echo never"})
			waitTask(t, ts, "the task to prepare", func(s api.TaskStatus) bool { return s.State == api.TaskPreparing })
			c.act(ts, fake)
			st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
			c.check(t, st)
			if b, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0})); strings.Contains(string(b), "never") {
				t.Errorf("the job ran:\n%s", b)
			}
		})
	}
}

// A batch script in an image: the container runs the script,
// written where the container sees it (the notice's directory, bound
// read-only), with the job's arguments, not the arguments alone.
func TestImageTaskRunsItsScript(t *testing.T) {
	fake := fakePodman(t)
	os.WriteFile(filepath.Join(fake, "go"), nil, 0o644)
	ts := newTasks(t, t.TempDir(), 0)
	ts.detach = false // as TestImageTaskPreparesThenRuns
	ts.images = &images{stateDir: ts.stateDir, devDir: t.TempDir()}
	os.MkdirAll(ts.stateDir, 0o755)
	ts.start(api.TaskSpec{JobID: "j1", Image: "docker.io/fake:1", Script: "#!/bin/sh\necho \"script-ran $# $1\"\n", Command: "'a b'"})
	st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	b, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0}))
	if st.ExitCode != 0 || !strings.Contains(string(b), "script-ran 1 a b\n") {
		t.Errorf("status %+v, log:\n%s\nwant the script run with its argument", st, b)
	}
	var args []string
	ts.mu.Lock()
	if tk := ts.byKey[taskKey{"j1", 0, 0}]; tk != nil && tk.image != nil {
		args = tk.image.argv
	}
	ts.mu.Unlock()
	cmd := ""
	if len(args) > 0 {
		cmd = args[len(args)-1]
	}
	script, _, _ := strings.Cut(strings.TrimPrefix(cmd, "exec '"), "'")
	bound := false
	for i, a := range args {
		if a == "--volume" && i+1 < len(args) && strings.HasPrefix(args[i+1], filepath.Dir(script)+":"+filepath.Dir(script)+":ro") {
			bound = true
		}
	}
	if !strings.HasPrefix(cmd, "exec '/") || !bound {
		t.Errorf("the container's command %q: want exec SCRIPT in a directory bound into the container; podman %q", cmd, args)
	}
}
