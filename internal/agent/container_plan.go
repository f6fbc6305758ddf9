package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral-sched/corral/internal/api"
)

// A container's plan: the podman flags, mounts, devices and environment
// one task gets, built from the task and the node (container.go fetches
// the image and runs podman; container_task.go is a task's side).

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
