package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Jobs in container images. A task with an image runs as
//
//	shim ── gate ── podman run --rm --init --cgroups=disabled … IMAGE sh -c CMD
//
// in place of `/bin/sh -c CMD`: podman is the job's main process, started
// in the attempt's cgroup like any job, and with --cgroups=disabled
// neither podman, conmon nor the container make a cgroup of their own, so
// every process of the container stays in the attempt's cgroup: its
// limits and device filter hold, and the shim's kill of the cgroup at the
// end (cancel, preemption, time limit) ends the container with it. The
// agent then removes what podman left of it (podman rm -f), so that
// nothing of the container outlives its attempt.
//
// Before that the task prepares: the agent fetches the image (podman
// pull, its progress in the job's log) while reporting the task as
// preparing, so that the job's clock starts only once the image is there.
// An image that cannot be had ends the task unstarted (start_failed).
//
// Podman runs as root (the agent's account) and the container as the
// job's account (--user UID:GID, --group-add for its groups), with the
// job's working directory and home bound at the same paths, the job's
// mounts, and exactly its GPUs: through CDI where the node has an NVIDIA
// CDI spec, else their device nodes and the driver's libraries. Podman's
// own environment is a fixed one (a job's could steer root's podman: its
// configuration files, its storage); the job's environment reaches the
// container through a private env file.

// Container runtimes (Config.ContainerRuntime, --container-runtime).
const (
	RuntimePodman = "podman"
	RuntimeNone   = "none"
)

// CheckContainerRuntime checks an agent's --container-runtime.
func CheckContainerRuntime(name string) error {
	switch name {
	case "", RuntimePodman, RuntimeNone:
		return nil
	}
	return fmt.Errorf("--container-runtime %q: want %s or %s", name, RuntimePodman, RuntimeNone)
}

// imagePullTimeout bounds the fetching of one image.
const imagePullTimeout = time.Hour

// podmanMaxNproc is the highest RLIMIT_NPROC a container gets: podman
// 4.3 lowers its own to this (measured), and crun, its child, can raise
// a container's no higher without CAP_SYS_RESOURCE.
const podmanMaxNproc = 32768

// podmanEnv is podman's own environment: fixed, never the job's.
var podmanEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C"}

// images runs a node's container runtime. Safe for concurrent use.
type images struct {
	runtime  string // RuntimePodman or RuntimeNone
	stateDir string // where env files and the runtime wrapper go
	devDir   string // the node's device nodes (/dev)
	cdiDirs  []string

	once    sync.Once
	podman  string   // podman's path; "": not found
	global  []string // podman's global flags (--runtime WRAPPER)
	setup   error    // why images cannot run here
	ldCache func() ([]byte, error)
}

// imageInfo is an image resolved on the node.
type imageInfo struct {
	ID     string   // podman's image id
	Digest string   // REPO@sha256:…, or the id where it has no repository digest
	Env    []string // names the image's own environment sets
}

// prepared is what a task's container needs at launch: podman's argv
// and environment.
type prepared struct {
	argv, env []string
	digest    string
	envFile   string
	name      string // the container's name
}

// ready finds podman and decides how to call it, once.
func (im *images) ready() error {
	im.once.Do(func() {
		if im.runtime == RuntimeNone {
			im.setup = errors.New("this node runs no container images (its agent has --container-runtime none)")
			return
		}
		path, err := osexec.LookPath("podman")
		if err != nil {
			path, err = osexec.LookPath("/usr/bin/podman")
		}
		if err != nil {
			im.setup = errors.New("this node cannot run container images: podman is not installed (apt-get install podman)")
			return
		}
		im.podman = path
		im.global, im.setup = im.runtimeFlags()
	})
	return im.setup
}

// runtimeFlags are podman's global flags. crun, podman's OCI runtime
// here, refuses to run anything on a hybrid cgroup system whose v2
// hierarchy holds controllers ("cgroups in hybrid mode not supported"),
// even with cgroups disabled: there podman is given a wrapper that runs
// crun in a mount namespace of its own without the v2 hierarchy, so that
// crun sees cgroup v1, which it takes.
func (im *images) runtimeFlags() ([]string, error) {
	if !hybridWithV2Controllers() {
		return nil, nil
	}
	crun, err := osexec.LookPath("crun")
	if err != nil {
		return nil, nil // another runtime: podman's own choice
	}
	dir := filepath.Join(im.stateDir, "container")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	// Named crun: podman lets only runtimes of that name run without
	// cgroups of their own.
	wrapper := filepath.Join(dir, "crun")
	script := "#!/bin/sh\n# corral: crun without the cgroup v2 mount of a hybrid system (container.go)\n" +
		"exec unshare --mount --propagation private /bin/sh -c 'umount -l /sys/fs/cgroup/unified 2>/dev/null; exec \"$0\" \"$@\"' " + shellQuote(crun) + " \"$@\"\n"
	if err := writeFileAtomic(wrapper, []byte(script)); err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	if err := os.Chmod(wrapper, 0o700); err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	return []string{"--runtime", wrapper}, nil
}

// hybridWithV2Controllers reports a hybrid cgroup system (v1 hierarchies
// under a tmpfs /sys/fs/cgroup) whose v2 hierarchy holds controllers.
func hybridWithV2Controllers() bool {
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) != nil || st.Type != 0x01021994 { // TMPFS_MAGIC
		return false
	}
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

// run runs podman with args and returns its output; what it prints goes
// to log as well when log is set.
func (im *images) run(ctx context.Context, log io.Writer, args ...string) ([]byte, error) {
	cmd := osexec.CommandContext(ctx, im.podman, append(slices.Clone(im.global), args...)...)
	cmd.Env = podmanEnv
	var out bytes.Buffer
	if log != nil {
		// One writer for both: os/exec then gives podman one pipe, copied
		// by one goroutine (two would write out at once, and a line could
		// be lost: the pull's error, its reason).
		w := io.MultiWriter(&out, log)
		cmd.Stdout, cmd.Stderr = w, w
	} else {
		cmd.Stdout, cmd.Stderr = &out, &out
	}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

// resolve makes the image available on the node (pulling it when it is
// not there, its progress written to log) and describes it.
func (im *images) resolve(ctx context.Context, ref string, log io.Writer) (imageInfo, error) {
	if err := im.ready(); err != nil {
		return imageInfo{}, err
	}
	if _, err := im.run(ctx, nil, "image", "exists", ref); err != nil {
		if ctx.Err() != nil {
			return imageInfo{}, ctx.Err()
		}
		fmt.Fprintf(log, "corral: pulling image %s\n", ref)
		pctx, cancel := context.WithTimeout(ctx, imagePullTimeout)
		out, err := im.run(pctx, log, "pull", ref)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return imageInfo{}, ctx.Err()
			}
			return imageInfo{}, fmt.Errorf("image %s cannot be had on this node: %s", ref, lastLine(out, err))
		}
	}
	out, err := im.run(ctx, nil, "image", "inspect", "--format", "{{json .}}", ref)
	if err != nil {
		return imageInfo{}, fmt.Errorf("image %s: %s", ref, lastLine(out, err))
	}
	var raw struct {
		ID          string   `json:"Id"`
		Digest      string   `json:"Digest"`
		RepoDigests []string `json:"RepoDigests"`
		Config      struct {
			Env []string `json:"Env"`
		} `json:"Config"`
	}
	if err := json.Unmarshal(firstJSON(out), &raw); err != nil || raw.ID == "" {
		return imageInfo{}, fmt.Errorf("image %s: podman image inspect: %q", ref, lastLine(out, err))
	}
	info := imageInfo{ID: raw.ID, Digest: "sha256:" + strings.TrimPrefix(raw.ID, "sha256:")}
	if len(raw.RepoDigests) > 0 {
		info.Digest = raw.RepoDigests[0]
		name := ref
		if i := strings.LastIndex(name, "@"); i >= 0 {
			name = name[:i]
		}
		for _, d := range raw.RepoDigests {
			if repo, _, _ := strings.Cut(d, "@"); strings.HasPrefix(name, repo) {
				info.Digest = d
				break
			}
		}
	}
	for _, kv := range raw.Config.Env {
		if k, _, ok := strings.Cut(kv, "="); ok {
			info.Env = append(info.Env, k)
		}
	}
	fmt.Fprintf(log, "corral: image %s is %s\n", ref, info.Digest)
	return info, nil
}

// firstJSON is podman inspect's answer: an array of one object, or the
// object itself.
func firstJSON(b []byte) []byte {
	var arr []json.RawMessage
	if json.Unmarshal(b, &arr) == nil && len(arr) > 0 {
		return arr[0]
	}
	return b
}

// lastLine is the last line podman printed, else err.
func lastLine(out []byte, err error) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return strings.TrimPrefix(l, "Error: ")
	}
	if err != nil {
		return err.Error()
	}
	return "no answer"
}

// containerName is a task's container's name on the node.
func containerName(k taskKey) string {
	return "corral-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, k.dirName())
}

// envFilePath is where a task's container environment is written.
func (im *images) envFilePath(k taskKey) string {
	return filepath.Join(im.stateDir, "container", k.dirName()+".env")
}

// remove removes what podman left of a task's container (it ran with
// --rm, but a SIGKILL of its cgroup leaves podman no time to clean up)
// and its env file.
func (im *images) remove(ctx context.Context, k taskKey) error {
	os.Remove(im.envFilePath(k))
	if im.ready() != nil {
		return nil // no podman: no container either
	}
	out, err := im.run(ctx, nil, "rm", "--force", "--ignore", "--time", "0", containerName(k))
	if err != nil {
		return fmt.Errorf("podman rm %s: %s", containerName(k), lastLine(out, err))
	}
	return nil
}

// mountSpec is one bind mount of a container.
type mountSpec struct {
	src, dst string
	ro       bool
}

func (m mountSpec) arg() string {
	s := m.src + ":" + m.dst
	if m.ro {
		s += ":ro"
	}
	return s
}

// containerPlan is everything podman run needs for a task, gathered by
// the agent; podmanArgs turns it into flags. Kept apart from the node
// so that tests can check the flags a given task gets.
type containerPlan struct {
	name      string
	imageID   string
	command   string
	cred      *credential
	workdir   string
	mounts    []mountSpec
	devices   []string // --device values
	envFile   string
	nofile    [2]uint64
	nproc     [2]uint64
	globalPre []string
}

// podmanArgs is the podman command line (less podman's path) of a plan.
// The command runs under bash where the image has it, else sh.
func (p containerPlan) podmanArgs() []string {
	args := append(slices.Clone(p.globalPre), "run", "--rm", "--name", p.name, "--init", "--pull=never",
		"--cgroups=disabled", "--cgroupns=host", "--network=host", "--ipc=host", "--log-driver=none",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", p.nofile[0], p.nofile[1]),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", p.nproc[0], p.nproc[1]))
	if p.cred != nil {
		args = append(args, "--user", fmt.Sprintf("%d:%d", p.cred.uid, p.cred.gid))
		for _, g := range p.cred.groups {
			if g != p.cred.gid {
				args = append(args, "--group-add", strconv.FormatUint(uint64(g), 10))
			}
		}
	}
	if p.workdir != "" {
		args = append(args, "--workdir", p.workdir)
	}
	for _, m := range p.mounts {
		args = append(args, "--volume", m.arg())
	}
	for _, d := range p.devices {
		args = append(args, "--device", d)
	}
	if p.envFile != "" {
		args = append(args, "--env-file", p.envFile)
	}
	return append(args, p.imageID, "/bin/sh", "-c",
		`if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; exec /bin/sh -c "$1"`, "corral-job", p.command)
}

// rlimit is this process's soft and hard limit of a resource, the hard
// one capped at max (0: no cap).
func rlimit(res int, max uint64) [2]uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(res, &l); err != nil {
		return [2]uint64{1024, 1024}
	}
	if max > 0 {
		l.Cur, l.Max = min(l.Cur, max), min(l.Max, max)
	}
	return [2]uint64{l.Cur, l.Max}
}

// gpuDevices are the --device values of a task's GPUs: CDI names where
// the node has an NVIDIA CDI spec, else the GPUs' device nodes (by their
// minors) and the driver's shared nodes, where present under devDir.
func gpuDevices(gpus []int, minors map[int]int, devDir string, cdiDirs []string) []string {
	if len(gpus) == 0 {
		return nil
	}
	if hasNvidiaCDI(cdiDirs) {
		out := make([]string, len(gpus))
		for i, g := range gpus {
			out[i] = "nvidia.com/gpu=" + strconv.Itoa(g)
		}
		return out
	}
	var out []string
	add := func(name string) {
		path := filepath.Join(devDir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			out = append(out, path+":/dev/"+name)
		}
	}
	for _, g := range gpus {
		m, ok := minors[g]
		if !ok {
			m = g
		}
		add("nvidia" + strconv.Itoa(m))
	}
	for _, name := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"} {
		add(name)
	}
	return out
}

// defaultCDIDirs are where CDI specs live.
var defaultCDIDirs = []string{"/etc/cdi", "/var/run/cdi"}

// hasNvidiaCDI reports whether one of dirs holds an NVIDIA CDI spec
// (nvidia*.yaml or nvidia*.json).
func hasNvidiaCDI(dirs []string) bool {
	for _, d := range dirs {
		for _, pat := range []string{"nvidia*.yaml", "nvidia*.yml", "nvidia*.json"} {
			if m, _ := filepath.Glob(filepath.Join(d, pat)); len(m) > 0 {
				return true
			}
		}
	}
	return false
}

// driverLibraries are the NVIDIA driver's libraries in the node's
// linker cache (ldconfig -p), each with the file its name resolves to.
func driverLibraries(ldcache []byte) []string {
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(ldcache))
	for sc.Scan() {
		name, path, ok := strings.Cut(strings.TrimSpace(sc.Text()), " => ")
		if !ok || !(strings.HasPrefix(name, "libnvidia") || strings.HasPrefix(name, "libcuda")) || !filepath.IsAbs(path) {
			continue
		}
		for _, p := range []string{path, resolved(path)} {
			if p != "" && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// resolved is where path's symlinks lead, "" where it does not exist.
func resolved(path string) string {
	r, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	return r
}

// driverMounts are read-only mounts of the driver's libraries and tools
// for a container given GPU device nodes (not CDI, which brings its own).
func (im *images) driverMounts() []mountSpec {
	var cache []byte
	if im.ldCache != nil {
		cache, _ = im.ldCache()
	} else {
		cache, _ = osexec.Command("ldconfig", "-p").Output()
	}
	var out []mountSpec
	for _, p := range driverLibraries(cache) {
		out = append(out, mountSpec{src: p, dst: p, ro: true})
	}
	for _, tool := range []string{"/usr/bin/nvidia-smi"} {
		if _, err := os.Stat(tool); err == nil {
			out = append(out, mountSpec{src: tool, dst: tool, ro: true})
		}
	}
	return out
}

// jobMounts are a task's bind mounts: its working directory and its
// account's home at their own paths, its preemption notice's directory
// and scratch directory, then its own mounts (SRC:DST[:ro]); each host
// directory the job's account could not reach is refused.
func jobMounts(spec api.TaskSpec, cred *credential, workdir, notice, scratch string) ([]mountSpec, error) {
	var out []mountSpec
	seen := map[string]bool{}
	add := func(m mountSpec) {
		if !seen[m.dst] {
			seen[m.dst] = true
			out = append(out, m)
		}
	}
	if workdir != "" {
		add(mountSpec{src: workdir, dst: workdir})
	}
	if cred != nil && cred.home != "" && cred.home != "/" {
		if fi, err := os.Stat(cred.home); err == nil && fi.IsDir() {
			add(mountSpec{src: cred.home, dst: cred.home})
		}
	}
	if notice != "" {
		add(mountSpec{src: filepath.Dir(notice), dst: filepath.Dir(notice), ro: true})
	}
	if scratch != "" {
		if fi, err := os.Stat(scratch); err == nil && fi.IsDir() {
			add(mountSpec{src: scratch, dst: scratch})
		}
	}
	for _, m := range spec.Mounts {
		src, dst, ro, err := api.ParseMount(m)
		if err != nil {
			return nil, fmt.Errorf("mount %s", err)
		}
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", m, err)
		}
		if err := canReach(real, cred); err != nil {
			return nil, fmt.Errorf("mount %s: %w", m, err)
		}
		seen[dst] = false // the job's own mount wins
		add(mountSpec{src: real, dst: dst, ro: ro})
	}
	return out, nil
}

// canReach reports whether the account cred (nil: the agent's, which
// reaches everything) may enter every directory on the way to path and
// read path itself, by the mode bits: a root podman binds whatever it is
// told, so a job must not be able to bind what its account could not
// open (a directory under another's private home).
func canReach(path string, cred *credential) error {
	if cred == nil {
		return nil
	}
	groups := append([]uint32{cred.gid}, cred.groups...)
	allowed := func(fi os.FileInfo, bit os.FileMode) bool {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := fi.Mode().Perm()
		switch {
		case st.Uid == cred.uid:
			return mode&(bit<<6) != 0
		case slices.Contains(groups, st.Gid):
			return mode&(bit<<3) != 0
		default:
			return mode&bit != 0
		}
	}
	dir := "/"
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !allowed(fi, 0o1) {
			return fmt.Errorf("the job's account (uid %d) cannot enter %s", cred.uid, dir)
		}
		if part == "" {
			break
		}
		dir = filepath.Join(dir, part)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !allowed(fi, 0o4) {
		return fmt.Errorf("the job's account (uid %d) cannot read %s", cred.uid, path)
	}
	return nil
}

// containerEnv is the container's environment from the job's (env, as
// the job would get it on the node): names the image sets itself
// (imageEnv) and PATH keep the image's values, but for Corral's own
// variables; a value the env file cannot carry (a newline) is left out
// and said in the log.
func containerEnv(env []string, imageEnv []string, log io.Writer) []string {
	var out []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n\r") {
			continue
		}
		if (k == "PATH" || slices.Contains(imageEnv, k)) && !corralVar(k) {
			continue
		}
		if strings.ContainsAny(v, "\n\r") {
			fmt.Fprintf(log, "corral: %s is not passed into the container (its value spans lines)\n", k)
			continue
		}
		out = append(out, kv)
	}
	return out
}

// corralVar reports a variable Corral sets for every job.
func corralVar(k string) bool {
	switch k {
	case "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK",
		"HOME", "USER", "LOGNAME":
		return true
	}
	return strings.HasPrefix(k, "CORRAL_")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startImage prepares a task with an image in the background: the
// image is fetched (the task reported as preparing meanwhile), then the
// task is launched as any other, its main process podman (jobProcess).
// A task stopped while it prepares ends unstarted, as if SIGTERM had
// ended it; one whose image cannot be had ends with the reason
// (start_failed). The job's clock starts at the launch.
func (t *tasks) startImage(tk *task, credFor credentialFunc) {
	cred, credErr := credFor(tk.spec.User) // here: credFor is the reconcile's, not safe for concurrent use
	ctx, cancel := context.WithCancel(context.Background())
	t.mu.Lock()
	tk.preparing, tk.cancelPrep = true, cancel
	stopping := tk.stopping
	t.mu.Unlock()
	if stopping {
		cancel()
	}
	t.changed()
	go func() {
		defer cancel()
		var p *prepared
		err := credErr
		if err == nil {
			p, err = t.prepareImage(ctx, tk, cred)
		}
		t.mu.Lock()
		stopped := tk.stopping
		tk.preparing, tk.cancelPrep, tk.image = false, nil, p
		tk.startedAt = time.Now().UTC() // the job's clock starts now, the image at hand
		t.mu.Unlock()
		now := time.Now().UTC()
		switch {
		case stopped:
			t.finish(tk, api.TaskStatus{ExitCode: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM.String(), FinishedAt: &now})
		case err != nil:
			t.log.Warn("task did not start", "job_id", tk.spec.JobID, "rank", tk.spec.Rank, "image", tk.spec.Image, "err", err)
			t.finish(tk, api.TaskStatus{ExitCode: -1, Error: err.Error(), FinishedAt: &now})
		default:
			if err := t.launch(tk, func(string) (*credential, error) { return cred, nil }); err != nil {
				t.log.Warn("task did not start", "job_id", tk.spec.JobID, "rank", tk.spec.Rank, "err", err)
				t.finish(tk, api.TaskStatus{ExitCode: -1, Error: err.Error(), FinishedAt: &now})
			}
		}
	}()
}

// prepareImage fetches the task's image and builds its podman command:
// its output goes to the job's log.
func (t *tasks) prepareImage(ctx context.Context, tk *task, cred *credential) (*prepared, error) {
	spec, k := tk.spec, keyOf(tk.spec)
	if t.images == nil {
		return nil, errors.New("this node runs no container images")
	}
	if spec.Workdir != "" {
		if fi, err := os.Stat(spec.Workdir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("workdir %q: not a directory one can enter", spec.Workdir)
		}
	}
	logf, err := openLog(t.logPath(k))
	if err != nil {
		return nil, fmt.Errorf("job log: %w", err)
	}
	defer logf.Close()
	info, err := t.images.resolve(ctx, spec.Image, logf)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fmt.Fprintf(logf, "corral: %v\n", err)
		return nil, err
	}
	if err := t.images.remove(ctx, k); err != nil { // a container of this name left by a crash
		return nil, err
	}
	if err := t.prepareNotice(tk, cred); err != nil {
		return nil, err
	}
	// A batch script is written now, where the container sees it (the
	// notice's directory, bound read-only below), and the container runs
	// `exec SCRIPT ARGS`. -o/-e files are not: their tee is the agent's
	// binary, which the image does not have (the server refuses them).
	if spec.Output != "" || spec.Error != "" {
		return nil, errors.New("output files (-o/--output, -e/--error) are not written for a job in a container image: read its log (corral logs)")
	}
	if err := t.prepareJobIO(tk, cred); err != nil { // jobio.go
		return nil, err
	}
	spec.Command = tk.spec.Command
	env := t.env(spec, cred)
	workdir := spec.Workdir
	if workdir == "" && cred != nil {
		if fi, err := os.Stat(cred.home); err == nil && fi.IsDir() {
			workdir = cred.home
		}
	}
	if workdir != "" {
		if err := canReach(workdir, cred); err != nil {
			return nil, fmt.Errorf("workdir %s: %w", workdir, err)
		}
	}
	mounts, err := jobMounts(spec, cred, workdir, t.noticeOf(k), envValue(env, "CORRAL_SCRATCH"))
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	minors := t.minors
	t.mu.Unlock()
	devices := gpuDevices(spec.GPUs, minors, t.images.devDir, t.images.cdiDirs)
	if len(devices) > 0 && !strings.HasPrefix(devices[0], "nvidia.com/") {
		mounts = append(mounts, t.images.driverMounts()...)
	}
	envFile := t.images.envFilePath(k)
	var body strings.Builder
	for _, kv := range containerEnv(env, info.Env, logf) {
		body.WriteString(kv + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(envFile), 0o700); err != nil {
		return nil, fmt.Errorf("container env: %w", err)
	}
	if err := writeFileAtomic(envFile, []byte(body.String())); err != nil {
		return nil, fmt.Errorf("container env: %w", err)
	}
	plan := containerPlan{name: containerName(k), imageID: info.ID, command: spec.Command, cred: cred, workdir: workdir,
		mounts: mounts, devices: devices, envFile: envFile, globalPre: t.images.global,
		nofile: rlimit(syscall.RLIMIT_NOFILE, 0), nproc: rlimit(unixRlimitNproc, podmanMaxNproc)}
	argv := append([]string{t.images.podman}, plan.podmanArgs()...)
	return &prepared{argv: argv, env: podmanEnv, digest: info.Digest, envFile: envFile, name: plan.name}, nil
}

// unixRlimitNproc is RLIMIT_NPROC (not in package syscall).
const unixRlimitNproc = 6

// envValue is the value of name in env ("" when unset).
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// jobProcess is how a task's main process runs: argv with env as the
// account cred, or, for a task in an image, podman's command line and
// environment as the agent's own account (podman runs the container as
// cred).
func (t *tasks) jobProcess(tk *task, cred *credential, argv, env []string) ([]string, []string, *credential) {
	if tk.image == nil {
		return argv, env, cred
	}
	return tk.image.argv, tk.image.env, nil
}

// imageDigest is the digest of the image the task runs in ("": none).
// Lock held.
func (tk *task) imageDigest() string {
	if tk.image == nil {
		return ""
	}
	return tk.image.digest
}

// endImage removes what is left of an ended task's container, in the
// background: its processes are gone (the cgroup's kill), podman's
// records and mounts may not be.
func (t *tasks) endImage(tk *task) {
	if tk.spec.Image == "" || t.images == nil {
		return
	}
	k := keyOf(tk.spec)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := t.images.remove(ctx, k); err != nil {
			t.log.Warn("container not removed", "job_id", k.job, "attempt", k.attempt, "err", err)
		}
	}()
}
