package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A task's side of running in an image: the image fetched while the task
// prepares, podman as its main process, and what podman left removed at
// its end (container.go has the runtime, container_plan.go the flags).

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
