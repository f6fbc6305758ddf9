package agent

import (
	"bufio"
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
)

// A shim host is one `corral shim --host` process that supervises many
// jobs, each as a one-job shim would (shimJob.run), so that starting a job
// costs a fork and exec of the job alone, not of a shim as well: the
// in-process agent of `corral up` (Config.Unfenced) starts its jobs
// through one, at the rate of jobs it started without a shim, and its jobs
// still outlive it. The host runs in its own session; it leaves nothing
// for a restarted agent to talk to: each job's record holds its spec, pid
// and exit status as a one-job shim's does, and its shim_pid names the
// host, so the next agent adopts the jobs (tasks.adopt) and watches their
// records for their ends.
//
// Protocol: the agent writes one JSON shimJob a line on the host's stdin;
// the host appends its pid (shim_pid) to the job's record, starts it and,
// once the job has ended and its exit status is in its record, writes the
// record's path, one a line, on file descriptor 3 (not stdout: a write
// there to a dead agent would kill the host with SIGPIPE). When stdin ends
// (the agent stopped or died), the host closes it, takes no more jobs and
// exits once its jobs have ended. The agent keeps the pid of its host in
// StateDir/shim-host.pid, so that the next agent can tell a request still
// in the dead agent's pipe from one never sent (tasks.adopt).

// runShimHost serves requests from in and reports ends on reports until
// in ends and no job runs. It returns the host's exit code.
func runShimHost(in io.Reader, reports *os.File) int {
	var (
		mu      sync.Mutex
		running int
		closed  bool
	)
	trees := &shimTrees{}    // one prepared cgroup tree per parent, for every job (containment.go)
	reaper := newSubreaper() // subreaper.go: what jobs leave behind is reaped here
	exitIfDone := func() {   // mu held
		if closed && running == 0 {
			trees.release() // its agent is gone, and so are its jobs
			reaper.drain(0)
			os.Exit(0)
		}
	}
	dec := json.NewDecoder(bufio.NewReader(in))
	for {
		var j shimJob
		if err := dec.Decode(&j); err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "corral shim host: a request: %v\n", err)
			}
			break
		}
		if j.State == "" || len(j.Argv) == 0 {
			fmt.Fprintf(os.Stderr, "corral shim host: a request without state or argv\n")
			continue
		}
		// Taken: the record names this host before the job can run, and
		// before the next request is read (see hostDrained).
		if err := appendRecord(j.State, record{ShimPID: os.Getpid()}); err != nil {
			fmt.Fprintf(os.Stderr, "corral shim host: not run, its record cannot be written: %v\n", err)
			mu.Lock()
			if reports != nil {
				reports.WriteString(j.State + "\n") // its agent reaps it: no exit status, lost
			}
			mu.Unlock()
			continue
		}
		mu.Lock()
		running++
		mu.Unlock()
		go func() {
			j.trees, j.reaper = trees, reaper
			j.ended = func() {
				mu.Lock()
				defer mu.Unlock()
				if reports != nil {
					reports.WriteString(j.State + "\n") // EPIPE once the agent is gone: nobody to tell
				}
			}
			j.run(nil) // tells the end (ended), then removes the job's cgroup
			mu.Lock()
			defer mu.Unlock()
			running--
			exitIfDone()
		}()
	}
	// Every request read has its shim_pid line: a restarted agent that
	// sees this host's stdin closed knows a record without one was never
	// taken, and never will be (hostDrained).
	if c, ok := in.(io.Closer); ok {
		c.Close()
	}
	mu.Lock()
	closed = true
	exitIfDone()
	mu.Unlock()
	select {} // the last job's end exits
}

// shimHost is the agent's side of a shim host, started at the first job.
// Safe for concurrent use.
type shimHost struct {
	mu      sync.Mutex
	enc     *json.Encoder // the host's stdin; nil: no host runs
	in      io.Closer
	pid     int
	waiting map[string]*task // by state directory, until the host reports it ended
}

// launch sends a job to the host (starting one if none runs) and returns
// the host's pid, which the host writes in the task's record as its
// shim_pid when it takes the job. The task is reaped once the host
// reports its end, or once the host is gone.
func (h *shimHost) launch(t *tasks, tk *task, j shimJob) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.enc == nil {
		if err := h.startLocked(t); err != nil {
			return 0, err
		}
	}
	h.waiting[j.State] = tk
	if err := h.enc.Encode(j); err != nil {
		delete(h.waiting, j.State)
		return 0, fmt.Errorf("shim host: %w", err)
	}
	return h.pid, nil
}

// startLocked starts a host: in its own session, so that it and its jobs
// outlive the agent; its stderr goes to StateDir/shim-host.log.
func (h *shimHost) startLocked(t *tasks) error {
	logf, err := os.OpenFile(filepath.Join(t.stateDir, "shim-host.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("shim host: %w", err)
	}
	defer logf.Close()
	rr, rw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("shim host: %w", err)
	}
	defer rw.Close()
	cmd := osexec.Command(t.shim[0], append(slices.Clone(t.shim[1:]), "--host")...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return credentialVar(k)
	})
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{rw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		rr.Close()
		return fmt.Errorf("shim host: %w", err)
	}
	if err := cmd.Start(); err != nil {
		rr.Close()
		return fmt.Errorf("start shim host: %w", err)
	}
	h.enc, h.in, h.pid = json.NewEncoder(in), in, cmd.Process.Pid
	if err := writeFileAtomic(hostPIDPath(t.stateDir), []byte(strconv.Itoa(h.pid))); err != nil {
		t.log.Warn("the shim host's pid is not recorded; a restart may count a job it was being sent as lost", "err", err)
	}
	if h.waiting == nil {
		h.waiting = map[string]*task{}
	}
	t.log.Info("shim host started", "pid", h.pid)
	go h.read(t, cmd, rr)
	return nil
}

// read reaps the tasks the host reports ended; once the host is gone, it
// reaps those it never reported (lost, unless their exit file says
// otherwise), and the next launch starts a new host.
func (h *shimHost) read(t *tasks, cmd *osexec.Cmd, r *os.File) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		h.mu.Lock()
		tk := h.waiting[sc.Text()]
		delete(h.waiting, sc.Text())
		h.mu.Unlock()
		if tk != nil {
			t.reap(tk)
		}
	}
	r.Close()
	cmd.Wait()
	h.mu.Lock()
	var left []*task
	if h.pid == cmd.Process.Pid {
		h.enc, h.in, h.pid = nil, nil, 0
		for dir, tk := range h.waiting {
			left = append(left, tk)
			delete(h.waiting, dir)
		}
	}
	h.mu.Unlock()
	if len(left) > 0 {
		t.log.Warn("the shim host ended with jobs it had not reported", "jobs", len(left))
	}
	for _, tk := range left {
		t.reap(tk)
	}
}

// close ends the host's stdin: it takes no more jobs and exits once those
// it runs have ended (the agent stops; its jobs run on).
func (h *shimHost) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.in != nil {
		h.in.Close()
	}
}

// shimJobOf is the request for a task's job as launch would pass it to a
// one-job shim.
func (t *tasks) shimJobOf(tk *task, cred *credential, env []string) shimJob {
	spec, k := tk.spec, keyOf(tk.spec)
	argv, env, cred := t.jobProcess(tk, cred, t.jobArgv(spec.Command), env) // container_task.go
	j := shimJob{State: tk.state, Log: t.logPath(k), Workdir: spec.Workdir, MaxLog: t.maxLogSize, UID: -1, GID: -1,
		Env: env, Argv: argv}
	if cred != nil {
		j.UID, j.GID = int(cred.uid), int(cred.gid)
		gs := make([]string, len(cred.groups))
		for i, g := range cred.groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		j.Groups = strings.Join(gs, ",")
	}
	if path := t.cgroupPath(spec); path != "" {
		raw, _ := json.Marshal(t.containSpec(spec))
		j.Cgroup, j.CgroupSpec = path, string(raw)
	}
	return j
}

// launchHosted starts a task's job through the agent's shim host; the
// task's state directory and spec are written (launch).
func (t *tasks) launchHosted(tk *task, cred *credential) error {
	spec := tk.spec
	pid, err := t.host.launch(t, tk, t.shimJobOf(tk, cred, t.env(spec, cred)))
	if err != nil {
		return err
	}
	t.log.Info("task started", "job_id", spec.JobID, "attempt", spec.Attempt, "rank", spec.Rank, "gpus", spec.GPUs, "shim_host", pid)
	t.changed()
	return nil
}

// hostPIDPath is where the agent keeps the pid of the shim host it started
// last.
func hostPIDPath(stateDir string) string { return filepath.Join(stateDir, "shim-host.pid") }

// hostDrainWait bounds how long a restarted agent waits for its
// predecessor's shim host to read what is left in its input.
const hostDrainWait = 5 * time.Second

// hostDrained reports whether the shim host the previous agent started
// last has read every request that agent sent it: it has closed its
// stdin, or it is gone. Until then a hosted record without shim_pid may
// be a request still in its pipe. It waits up to hostDrainWait; false:
// the host is still reading (or its pid names another process now).
func hostDrained(stateDir string) bool {
	pid := readInt(hostPIDPath(stateDir))
	if pid <= 0 {
		return false // an earlier version's host: it says nothing of its input
	}
	stdin := "/proc/" + strconv.Itoa(pid) + "/fd/0"
	deadline := time.Now().Add(hostDrainWait)
	for {
		if !alive(pid) {
			return true
		}
		if _, err := os.Lstat(stdin); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // poll interval: the host reads its last requests
	}
}
