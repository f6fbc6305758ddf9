package agent

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// The shim is a small supervisor between the agent and a job, run as
// `corral shim` (the agent re-executes its own binary). It starts the job in
// a process group of its own, records the job's pid, waits for it, kills
// whatever the job left behind, and writes the exit status to the task's
// record (record.go). It runs in its own session, so a standalone agent can
// die and restart without taking its jobs along: the new agent finds the
// tasks' records and adopts them. Under `corral up` one shim host does the
// same for every job of the node (shimhost.go), unfenced.
//
// Fencing: a standalone agent touches a file (see Agent.Run) every second
// while it lives; a shim started with --alive and --fence kills its job once
// that file is older than the fence (the node TTL the server gave). The
// server requeues a silent node's jobs only after the same TTL and a
// backoff, so an attempt whose agent died is gone before its retry starts
// elsewhere: a job never runs twice at once because an agent died. (A
// network partition that leaves the agent alive is settled when it heals:
// the agent then stops what the server no longer wants.)
//
// The shim appends two lines to the task's record (--state): the job's
// pid (= its process group) once it runs, its exit status once it has
// ended.

// exitStatus is what the shim writes when the job ends.
type exitStatus struct {
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal,omitempty"`
	Lost       string    `json:"lost,omitempty"` // set when the shim itself was told to stop (its agent died)
	FinishedAt time.Time `json:"finished_at"`
	Error      string    `json:"error,omitempty"` // the job could not start
	// OOMKilled: the OOM killer acted in the job's cgroup.
	OOMKilled bool `json:"oom_killed,omitempty"`
}

// RunShim is `corral shim --state RECORD --log FILE [--max-log-size N] [--workdir DIR] [--env-stdin] -- bash -c CMD`.
// The job's environment is read from stdin with --env-stdin (the agent's
// way: the shim's own environment is the agent's, never the job's), else
// it is the shim's. Its output goes through a pipe into
// the log, capped at --max-log-size (logcap.go). It returns the shim's exit code.
//
// `corral shim --host` is a shim host instead: one long-lived shim that
// supervises many jobs (shimhost.go).
func RunShim(args []string) int {
	if len(args) > 0 && args[0] == "--tee" {
		return runTee(args[1:]) // tee.go: a job's -o/-e files
	}
	if len(args) > 0 && args[0] == "--host" {
		syscall.CloseOnExec(3) // the reports pipe reaches no job: one could forge another's end
		return runShimHost(os.Stdin, os.NewFile(3, "reports"))
	}
	fs := flag.NewFlagSet("shim", flag.ContinueOnError)
	state := fs.String("state", "", "the task's record file (record.go), appended to")
	logPath := fs.String("log", "", "log file (appended)")
	workdir := fs.String("workdir", "", "working directory")
	alive := fs.String("alive", "", "the agent's liveness file (with --fence)")
	fence := fs.Duration("fence", 0, "kill the job once the liveness file is older than this")
	uid := fs.Int("uid", -1, "run the job as this uid (with --gid; the shim must be root)")
	gid := fs.Int("gid", -1, "the job's gid")
	groups := fs.String("groups", "", "the job's supplementary group ids, comma-separated")
	maxLog := fs.Int64("max-log-size", DefaultMaxLogSize, "bytes of output the log keeps; the rest is dropped behind a marker (0: no cap)")
	cgroupPath := fs.String("cgroup", "", "run the job in this cgroup (relative to the shim's own)")
	cgroupSpec := fs.String("cgroup-spec", "", "the cgroup's limits (JSON contain.Spec)")
	envStdin := fs.Bool("env-stdin", false, "read the job's environment from stdin, NUL-separated KEY=VALUE (default: the shim's own)")
	if err := fs.Parse(args); err != nil || *state == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: corral shim --state RECORD --log FILE [--max-log-size N] [--workdir DIR] -- COMMAND...")
		return 2
	}
	// Ask to be told when we must stop before anything else can race it.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	var env []string
	if *envStdin {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "corral shim: the job's environment: %v\n", err)
			return 2
		}
		env = []string{}
		if len(b) > 0 {
			env = strings.Split(string(b), "\x00")
		}
	}
	reaper := newSubreaper() // subreaper.go: what the job leaves behind is reaped here
	shimJob{State: *state, Log: *logPath, Workdir: *workdir, Alive: *alive, Fence: *fence, UID: *uid, GID: *gid,
		Groups: *groups, MaxLog: *maxLog, Cgroup: *cgroupPath, CgroupSpec: *cgroupSpec, Env: env, Argv: fs.Args(), reaper: reaper}.run(stop)
	reaper.drain(orphanDrain)
	return 0
}

// shimJob is one job a shim supervises: the flags of `corral shim`, or
// one request to a shim host (shimhost.go).
type shimJob struct {
	State      string        `json:"state"`
	Log        string        `json:"log"`
	Workdir    string        `json:"workdir,omitempty"`
	Alive      string        `json:"alive,omitempty"`
	Fence      time.Duration `json:"fence,omitempty"`
	UID        int           `json:"uid"`
	GID        int           `json:"gid"`
	Groups     string        `json:"groups,omitempty"`
	MaxLog     int64         `json:"max_log"`
	Cgroup     string        `json:"cgroup,omitempty"`
	CgroupSpec string        `json:"cgroup_spec,omitempty"`
	Env        []string      `json:"env,omitempty"` // nil: the shim's own environment
	Argv       []string      `json:"argv"`

	trees  *shimTrees // the shim host's cgroup trees; nil: a shim of one job
	reaper *subreaper // starts the job, reaps what it leaves (subreaper.go); nil: none
	// ended, where set, is called once the exit status is in the record
	// and no process of the job is left, before its cgroup is removed:
	// the shim host tells its agent there, so that the job's GPUs go to
	// the next job without waiting for the kernel to tear the cgroup down.
	ended func()
}

// run starts the job, waits for it, kills what it left behind and writes
// its exit status in the task's record. A signal on stop
// (nil: none) kills the job.
func (j shimJob) run(stop <-chan os.Signal) {
	out := openLogPipe(j.Log, j.MaxLog) // the job's output, capped (logcap.go)
	argv := j.Argv
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Dir = j.Workdir
	cmd.Env = j.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out != nil {
		cmd.Stdout, cmd.Stderr = out.w, out.w
	}
	cred, err := parseCredential(j.UID, j.GID, j.Groups)
	cmd.SysProcAttr.Credential = cred
	var jcg *jobCgroup
	if err == nil {
		jcg, err = j.trees.open(j.Cgroup, j.CgroupSpec) // containment.go
	}
	jcg.wrap(cmd) // gated: runs nothing of the job's before it is in its cgroup
	if err == nil {
		if err = j.reaper.start(cmd); err != nil {
			jcg.abort()
		} else if err = jcg.admit(cmd.Process.Pid); err != nil {
			cmd.Wait()
			j.reaper.forget(cmd.Process.Pid)
			jcg.abort()
		}
	}
	if err != nil {
		out.printf("corral: %v\n", err)
		out.finish()
		shimWriteExit(j.State, exitStatus{ExitCode: -1, Error: err.Error(), FinishedAt: time.Now().UTC()})
		if j.ended != nil {
			j.ended()
		}
		return
	}
	out.started()
	// The pid goes in the record once the job is let go, not before: an
	// agent that stopped the job while it waited at the gate (a
	// preemption) would fail its release, and the stop would read as a
	// failed start.
	pid := cmd.Process.Pid
	appendRecord(j.State, record{PID: pid}) // record.go

	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		j.reaper.forget(pid)
		done <- err
	}()
	var fenceTick <-chan time.Time
	if j.Fence > 0 && j.Alive != "" {
		t := time.NewTicker(fencePoll)
		defer t.Stop()
		fenceTick = t.C
	}
	lost := ""
wait:
	for {
		select {
		case <-done:
			break wait
		case sig := <-stop:
			// Our agent is gone (or we were told to go): the job goes too.
			lost = "the agent stopped (" + sig.String() + ")"
		case <-fenceTick:
			fi, err := os.Stat(j.Alive)
			if err == nil && time.Since(fi.ModTime()) <= j.Fence {
				continue
			}
			lost = fmt.Sprintf("no agent for over %s (the node TTL): the server has moved the job on", j.Fence)
		}
		syscall.Kill(-pid, syscall.SIGKILL)
		<-done
		break wait
	}
	syscall.Kill(-pid, syscall.SIGKILL) // whatever the job left in its group
	oom := jcg.end(slog.Default())      // and in its cgroup
	st := exitStatus{ExitCode: cmd.ProcessState.ExitCode(), Lost: lost, FinishedAt: time.Now().UTC(), OOMKilled: oom}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.ExitCode, st.Signal = 128+int(ws.Signal()), ws.Signal().String()
	}
	out.finish() // the log is whole before the end is told
	shimWriteExit(j.State, st)
	if j.ended != nil {
		j.ended()
	}
	jcg.remove(slog.Default()) // off the start path: its processes are dead (end)
}

// fencePoll is how often a fenced shim looks at its agent's liveness file.
const fencePoll = 250 * time.Millisecond

// orphanDrain bounds how long a one-job shim waits, before it exits, for
// the orphans its job left (killed with it) to end, so as to reap them.
const orphanDrain = 500 * time.Millisecond

// shimWriteExit is the shim's writeExit: the end is told (to the shim
// host's agent, or by the shim's own exit) only once it returns. A record
// has room kept for the line (reserveRecord); where the file system could
// not keep it and the disk is full, the shim tries again every exitRetry
// until the line is written: the job is seen running until then, and is
// not lost for a full disk.
func shimWriteExit(path string, st exitStatus) error {
	line, err := json.Marshal(record{Exit: &st})
	if err != nil {
		return err
	}
	line = append(line, '\n')
	said := false
	for {
		err := writeRecordLine(path, line, os.O_SYNC)
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
			return err
		}
		if line[0] != '\n' {
			// What the failed write wrote of the line ends as a line of
			// its own, which readers skip (readRecord).
			line = append([]byte{'\n'}, line...)
		}
		if !said {
			fmt.Fprintf(os.Stderr, "corral shim: the exit status of %s waits for room on its disk: %v\n", path, err)
			said = true
		}
		time.Sleep(exitRetry)
	}
}

// exitRetry is how often a shim tries again to write an exit status its
// full disk refused.
const exitRetry = time.Second

// writeFileAtomic writes a file so that readers see all of it or none;
// only its owner may read it (a task's spec holds the job's env).
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// alive reports whether a process exists (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	f, err := procStat(pid)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return len(f) == 0 || f[0] != "Z"
}
