// Package agent is Corral's node agent: it runs jobs' processes on this
// machine and reports on them.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

// Runner runs tasks as local processes: each under /bin/sh -c in its own
// process group, output appended to the task's log file. It implements
// exec.Executor and is safe for concurrent use.
type Runner struct {
	logger *slog.Logger
	sink   exec.Sink

	mu    sync.Mutex
	procs map[taskKey]*proc
}

// RunningTask describes a process the Runner is running.
type RunningTask struct {
	JobID     string
	Attempt   int
	PID       int // also the process group id
	StartedAt time.Time
}

type taskKey struct {
	jobID   string
	attempt int
}

// proc is one running task. Fields other than done are guarded by Runner.mu.
type proc struct {
	RunningTask
	notice string // the task's NoticePath
	exited bool
	kill   *time.Timer   // SIGKILL after the grace period of the first Stop
	done   chan struct{} // closed once the Exited update has been sent
}

var (
	_ exec.Executor = (*Runner)(nil)
	_ exec.Noticer  = (*Runner)(nil)
)

// NewRunner returns a Runner that reports to sink. A nil logger discards
// logs; a nil sink discards updates.
func NewRunner(logger *slog.Logger, sink exec.Sink) *Runner {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if sink == nil {
		sink = func(exec.Update) {}
	}
	return &Runner{logger: logger, sink: sink, procs: make(map[taskKey]*proc)}
}

// Start launches t and returns once its process runs; a Started update has
// then been sent, and an Exited update follows when the process ends. If
// the process cannot be launched, Start returns the reason and sends no
// update; the reason is also appended to the log file when that could be
// opened.
func (r *Runner) Start(ctx context.Context, t exec.Task) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start job %s: %w", t.JobID, err)
	}
	if t.JobID == "" {
		return errors.New("start job: empty job id")
	}
	if strings.TrimSpace(t.Command) == "" {
		return fmt.Errorf("start job %s: empty command", t.JobID)
	}
	env, err := taskEnv(os.Environ(), t)
	if err != nil {
		return fmt.Errorf("start job %s: %w", t.JobID, err)
	}

	logFile, err := openLog(t.LogPath)
	if err != nil {
		return fmt.Errorf("start job %s: %w", t.JobID, err)
	}
	defer func() {
		if err != nil && logFile != nil {
			fmt.Fprintf(logFile, "corral: %v\n", err)
			logFile.Close()
		}
	}()

	if t.Workdir != "" {
		if err := checkDir(t.Workdir); err != nil {
			return fmt.Errorf("start job %s: %w", t.JobID, err)
		}
	}

	cmd := osexec.Command("/bin/sh", "-c", t.Command)
	cmd.Dir = t.Workdir
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if logFile != nil { // nil Stdin, Stdout or Stderr mean /dev/null
		cmd.Stdout, cmd.Stderr = logFile, logFile
	}

	key := taskKey{t.JobID, t.Attempt}
	r.mu.Lock()
	if _, dup := r.procs[key]; dup {
		r.mu.Unlock()
		return fmt.Errorf("start job %s: attempt %d is already running", t.JobID, t.Attempt)
	}
	// Start under the lock so that Stop never finds a task without a pid.
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		return fmt.Errorf("start job %s: %w", t.JobID, err)
	}
	p := &proc{
		RunningTask: RunningTask{JobID: t.JobID, Attempt: t.Attempt, PID: cmd.Process.Pid, StartedAt: time.Now()},
		notice:      t.NoticePath,
		done:        make(chan struct{}),
	}
	r.procs[key] = p
	r.mu.Unlock()

	r.logger.Info("job started", "job_id", t.JobID, "attempt", t.Attempt, "pid", p.PID, "gpus", t.GPUs)
	r.sink(exec.Update{JobID: t.JobID, Attempt: t.Attempt, Kind: exec.Started, At: p.StartedAt, PID: p.PID})
	go r.wait(key, p, cmd, logFile)
	return nil
}

// wait reaps the task's shell, kills what is left of its process group,
// and reports the exit.
func (r *Runner) wait(key taskKey, p *proc, cmd *osexec.Cmd, logFile *os.File) {
	waitErr := cmd.Wait()
	// No straggler may outlive the job: background children hold GPUs too.
	killGroup(r.logger, p.JobID, p.PID, syscall.SIGKILL)
	if logFile != nil {
		if err := logFile.Close(); err != nil {
			r.logger.Warn("close job log", "job_id", p.JobID, "err", err)
		}
	}

	u := exec.Update{JobID: p.JobID, Attempt: p.Attempt, Kind: exec.Exited, At: time.Now()}
	switch ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); {
	case ok && ws.Signaled():
		u.ExitCode = 128 + int(ws.Signal())
		u.Signal = ws.Signal().String()
	case cmd.ProcessState != nil:
		u.ExitCode = cmd.ProcessState.ExitCode()
	default:
		u.ExitCode = -1
		u.Err = waitErr
	}

	r.mu.Lock()
	p.exited = true
	if p.kill != nil {
		p.kill.Stop()
	}
	delete(r.procs, key)
	r.mu.Unlock()

	r.logger.Info("job exited", "job_id", p.JobID, "attempt", p.Attempt, "pid", p.PID,
		"exit_code", u.ExitCode, "signal", u.Signal, "runtime", u.At.Sub(p.StartedAt).Round(time.Millisecond))
	r.sink(u)
	close(p.done)
}

// Stop sends SIGTERM to the attempt's whole process group now and SIGKILL
// after grace, unless it exits first. A later Stop of the same attempt sends
// SIGTERM again but keeps the first deadline. Stopping an attempt that is not
// running does nothing.
func (r *Runner) Stop(ctx context.Context, jobID string, attempt int, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[taskKey{jobID, attempt}]
	if !ok || p.exited {
		return nil
	}
	r.logger.Info("stopping job", "job_id", jobID, "attempt", attempt, "pid", p.PID, "grace", grace)
	killGroup(r.logger, jobID, p.PID, syscall.SIGTERM)
	if p.kill == nil {
		p.kill = time.AfterFunc(max(grace, 0), func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if !p.exited {
				r.logger.Warn("grace period over, killing job", "job_id", jobID, "attempt", attempt, "pid", p.PID)
				killGroup(r.logger, jobID, p.PID, syscall.SIGKILL)
			}
		})
	}
	return nil
}

// StopAll stops every running task as Stop does and waits until all have
// exited and their Exited updates have been sent, or ctx is done.
func (r *Runner) StopAll(ctx context.Context, grace time.Duration) error {
	r.mu.Lock()
	procs := make([]*proc, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		if err := r.Stop(ctx, p.JobID, p.Attempt, grace); err != nil {
			return err
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("stop all jobs: %w", ctx.Err())
		}
	}
	return nil
}

// Running returns the running tasks, ordered by job id and attempt.
func (r *Runner) Running() []RunningTask {
	r.mu.Lock()
	out := make([]RunningTask, 0, len(r.procs))
	for _, p := range r.procs {
		out = append(out, p.RunningTask)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b RunningTask) int {
		return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Attempt, b.Attempt))
	})
	return out
}

// killGroup signals process group pgid; a group already gone is fine.
func killGroup(logger *slog.Logger, jobID string, pgid int, sig syscall.Signal) {
	if pgid <= 1 { // kill(0) or kill(-1) would hit us or everyone
		return
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		logger.Warn("signal job", "job_id", jobID, "pgid", pgid, "signal", sig.String(), "err", err)
	}
}

// taskEnv returns the environment for t: base, then t.Env, then the
// variables Corral sets, which override both.
func taskEnv(base []string, t exec.Task) ([]string, error) {
	vals := make(map[string]string, len(base)+len(t.Env)+8)
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			set(k, v)
		}
	}
	keys := make([]string, 0, len(t.Env))
	for k := range t.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := t.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("env: invalid variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("env: value of %s contains a NUL byte", k)
		}
		set(k, v)
	}

	gpus := make([]string, len(t.GPUs))
	for i, g := range t.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	visible := strings.Join(gpus, ",")
	nvidiaVisible := visible
	if len(t.GPUs) == 0 {
		nvidiaVisible = "void"
	}
	set("CUDA_VISIBLE_DEVICES", visible)
	set("NVIDIA_VISIBLE_DEVICES", nvidiaVisible)
	set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	set("CORRAL_JOB_ID", t.JobID)
	set("CORRAL_GPUS", visible)
	set("CORRAL_GPU_UUIDS", strings.Join(t.GPUUUIDs, ","))
	set("CORRAL_ATTEMPT", strconv.Itoa(t.Attempt))
	set("CORRAL_NODE_ID", t.NodeID)
	if t.NoticePath != "" {
		set("CORRAL_PREEMPT_NOTICE", t.NoticePath)
	}

	env := make([]string, len(order))
	for i, k := range order {
		env[i] = k + "=" + vals[k]
	}
	return env, nil
}

// openLog opens path for appending, creating it and its directory. An empty
// path gives a nil file: output is discarded.
func openLog(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// checkDir reports, in a readable form, why dir cannot be a working
// directory. (os/exec reports a bad Dir as an error of /bin/sh.)
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("workdir %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workdir %q: %w", dir, syscall.ENOTDIR)
	}
	return nil
}

// Notice writes text to the running attempt's notice file (atomically:
// written beside it, then renamed), so the job sees the whole notice or
// none. Unknown attempts, and tasks without a notice path, are not an error.
func (r *Runner) Notice(ctx context.Context, jobID string, attempt int, text string) error {
	r.mu.Lock()
	p, ok := r.procs[taskKey{jobID, attempt}]
	path := ""
	if ok {
		path = p.notice
	}
	r.mu.Unlock()
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("notice for job %s: %w", jobID, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return fmt.Errorf("notice for job %s: %w", jobID, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("notice for job %s: %w", jobID, err)
	}
	return nil
}
