package agent

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The shim is a small supervisor between the agent and a job, run as
// `corral shim` (the agent re-executes its own binary). It starts the job in
// a process group of its own, records the job's pid, waits for it, kills
// whatever the job left behind, and writes the exit status to a file. It
// runs in its own session, so a standalone agent can die and restart
// without taking its jobs along: the new agent finds the shims' state
// directories and adopts them. Under `corral up` the shim gets a parent
// death signal instead, and takes its job down with the server.
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
// State directory files:
//
//	pid        the job's pid (= its process group), written once it runs
//	exit.json  the exit status (exitStatus), written once it has ended

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

// RunShim is `corral shim --state DIR --log FILE [--max-log-size N] [--workdir DIR] -- /bin/sh -c CMD`.
// The job's environment is the shim's. Its output goes through a pipe into
// the log, capped at --max-log-size (logcap.go). It returns the shim's exit code.
func RunShim(args []string) int {
	fs := flag.NewFlagSet("shim", flag.ContinueOnError)
	state := fs.String("state", "", "state directory")
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
	if err := fs.Parse(args); err != nil || *state == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: corral shim --state DIR --log FILE [--max-log-size N] [--workdir DIR] -- COMMAND...")
		return 2
	}
	// Ask to be told when we must stop before anything else can race it.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	out := openLogPipe(*logPath, *maxLog) // the job's output, capped (logcap.go)
	argv := fs.Args()
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Dir = *workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out != nil {
		cmd.Stdout, cmd.Stderr = out.w, out.w
	}
	cred, err := parseCredential(*uid, *gid, *groups)
	cmd.SysProcAttr.Credential = cred
	var jcg *jobCgroup
	if err == nil {
		jcg, err = openShimCgroup(*cgroupPath, *cgroupSpec)
	}
	jcg.wrap(cmd) // gated: runs nothing of the job's before it is in its cgroup
	if err == nil {
		if err = cmd.Start(); err != nil {
			jcg.abort()
		} else if err = jcg.admit(cmd.Process.Pid); err != nil {
			cmd.Wait()
			jcg.abort()
		}
	}
	if err != nil {
		out.printf("corral: %v\n", err)
		out.finish()
		writeExit(*state, exitStatus{ExitCode: -1, Error: err.Error(), FinishedAt: time.Now().UTC()})
		return 0
	}
	out.started()
	pid := cmd.Process.Pid
	writeFileAtomic(filepath.Join(*state, "pid"), []byte(strconv.Itoa(pid)))

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var fenceTick <-chan time.Time
	if *fence > 0 && *alive != "" {
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
			fi, err := os.Stat(*alive)
			if err == nil && time.Since(fi.ModTime()) <= *fence {
				continue
			}
			lost = fmt.Sprintf("no agent for over %s (the node TTL): the server has moved the job on", *fence)
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
	writeExit(*state, st)
	jcg.remove(slog.Default()) // off the start path: its processes are dead (end)
	return 0
}

// fencePoll is how often a fenced shim looks at its agent's liveness file.
const fencePoll = 250 * time.Millisecond

func writeExit(dir string, st exitStatus) {
	b, _ := json.Marshal(st)
	writeFileAtomic(filepath.Join(dir, "exit.json"), b)
}

// writeFileAtomic writes a file so that readers see all of it or none;
// only its owner may read it (a task's spec holds the job's env).
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readExit reads a shim's exit status; false when there is none yet.
func readExit(dir string) (exitStatus, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "exit.json"))
	if err != nil {
		return exitStatus{}, false
	}
	var st exitStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return exitStatus{}, false
	}
	return st, true
}

// readPID reads the job pid a shim recorded; 0 when there is none.
func readPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// alive reports whether a process exists (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command in parentheses: "pid (comm) S ...".
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] != 'Z'
		}
	}
	return true
}
