package agent

import (
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
	"strings"
	"sync"
	"syscall"
	"time"
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
