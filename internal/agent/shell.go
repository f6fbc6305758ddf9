package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/corral-sched/corral/internal/shellproto"
	"github.com/corral-sched/corral/internal/tunnel"
)

// Shells and port streams into running jobs (corral shell, corral alloc,
// the notebook proxy). A shell runs on the node of the job's rank, as the
// job does: with its environment (CUDA_VISIBLE_DEVICES, CORRAL_*, its
// env), in its workdir, under its Unix account, in its cgroup (so it sees
// only the job's GPUs and counts against its limits). It ends when its
// command ends, when its client goes, or when the job's task ends.

// ErrNoTask is returned for a shell or port request for a task that does
// not run on this node.
var ErrNoTask = tunnel.ErrNoTask

// shellKill is how long a shell has between SIGHUP and SIGKILL when its
// client goes or its job ends.
const shellKill = 2 * time.Second

// shellSet tracks the shells open into each task, to end them with it.
type shellSet struct {
	mu   sync.Mutex
	open map[taskKey]map[*shellSession]bool
}

// shellSession is one shell's process and its frame writer. It joins its
// task's set before its process starts, so that a notice sent once the
// process runs reaches it; pid is 0 until then (guarded by the set's mu).
type shellSession struct {
	pid  int
	job  string
	out  *shellproto.Writer
	once sync.Once
}

// tell tells the shell's client, once, that the job has ended.
func (sh *shellSession) tell() {
	sh.once.Do(func() {
		sh.out.Write(shellproto.Error, []byte(fmt.Sprintf("\r\ncorral: job %s has ended (its allocation is over); closing this shell\r\n", sh.job)))
	})
}

func (s *shellSet) add(k taskKey, sh *shellSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[taskKey]map[*shellSession]bool{}
	}
	if s.open[k] == nil {
		s.open[k] = map[*shellSession]bool{}
	}
	s.open[k][sh] = true
}

func (s *shellSet) remove(k taskKey, sh *shellSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open[k], sh)
	if len(s.open[k]) == 0 {
		delete(s.open, k)
	}
}

// end tells every shell of the task that it has ended and stops them.
// A nil set does nothing.
func (s *shellSet) end(k taskKey) {
	if s == nil {
		return
	}
	s.mu.Lock()
	shells := s.open[k]
	delete(s.open, k)
	pids := make(map[*shellSession]int, len(shells))
	for sh := range shells {
		pids[sh] = sh.pid
	}
	s.mu.Unlock()
	for sh := range shells {
		sh.tell()
		if pids[sh] != 0 { // else not started yet: its start finds the task gone and hangs it up
			hangUp(pids[sh])
		}
	}
}

// started records the pid of a session's process once it runs.
func (s *shellSet) started(sh *shellSession, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh.pid = pid
}

// notice shows a task's notice (it will be stopped soon) in each of its
// shells. A nil set does nothing.
func (s *shellSet) notice(k taskKey, text string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	shells := make([]*shellSession, 0, len(s.open[k]))
	for sh := range s.open[k] {
		shells = append(shells, sh)
	}
	s.mu.Unlock()
	for _, sh := range shells {
		sh.out.Write(shellproto.Notice, []byte("\r\ncorral: notice for job "+k.job+": "+strings.TrimSpace(text)+"\r\n"))
	}
}

// hangUp sends SIGHUP to a shell's session, then SIGKILL after shellKill.
func hangUp(pid int) {
	syscall.Kill(-pid, syscall.SIGHUP)
	time.AfterFunc(shellKill, func() { syscall.Kill(-pid, syscall.SIGKILL) })
}

// runningTask returns the spec of the task the request names, if it runs
// here and is not stopping.
func (t *tasks) runningTask(req shellproto.Request) (*task, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.byKey[taskKey{req.JobID, req.Attempt, req.Rank}]
	if tk == nil || tk.exited != nil || tk.stopping {
		return nil, fmt.Errorf("%w: job %s attempt %d rank %d", ErrNoTask, req.JobID, req.Attempt, req.Rank)
	}
	return tk, nil
}

// ServeShell runs the shell the request asks for in its job's task and
// relays it over conn (shellproto frames) until the command ends, conn
// fails, or the task ends. It always closes conn; the last frame sent is
// Exit with the command's code (after an Error frame if it could not run).
func (a *Agent) ServeShell(ctx context.Context, req shellproto.Request, conn io.ReadWriteCloser) error {
	defer conn.Close()
	out := shellproto.NewWriter(conn)
	err := a.serveShell(ctx, req, conn, out)
	if err != nil {
		out.Write(shellproto.Error, []byte("corral: "+err.Error()+"\r\n"))
		out.WriteExit(127)
	}
	return err
}

func (a *Agent) serveShell(ctx context.Context, req shellproto.Request, conn io.Reader, out *shellproto.Writer) error {
	t := a.tasks
	tk, err := t.runningTask(req)
	if err != nil {
		return err
	}
	spec, k := tk.spec, keyOf(tk.spec)
	cred, err := t.credential(spec.User)
	if err != nil {
		return err
	}
	argv := req.Command
	if len(argv) == 0 {
		argv = []string{defaultShell()}
	}
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Env = t.env(spec, cred)
	if req.TTY {
		term := req.Term
		if term == "" {
			term = "xterm"
		}
		cmd.Env = append(cmd.Env, "TERM="+term)
	}
	cmd.Dir = spec.Workdir
	if cmd.Dir == "" && cred != nil {
		cmd.Dir = cred.home
	}
	if fi, err := os.Stat(cmd.Dir); cmd.Dir != "" && (err != nil || !fi.IsDir()) {
		cmd.Dir = "/"
	}
	// The session joins the task's shells before its process starts: a
	// notice sent once the shell runs (and has printed) reaches it.
	sh := &shellSession{job: spec.JobID, out: out}
	t.shells.add(k, sh)
	defer t.shells.remove(k, sh)
	jcg, err := t.openCgroup(spec) // the job's own cgroup, made already: joined
	if err != nil {
		return fmt.Errorf("join the job's cgroup: %w", err)
	}
	jcg.wrap(cmd)
	attrs := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if cred != nil {
		attrs.Credential = &syscall.Credential{Uid: cred.uid, Gid: cred.gid, Groups: cred.groups}
	}
	var ptmx *os.File
	var stdin io.WriteCloser
	var copying sync.WaitGroup
	if req.TTY {
		attrs.Setctty = true
		ptmx, err = startPTY(cmd, req, attrs, cred)
		if err == nil {
			stdin = ptmx
			copying.Add(1)
			go func() { defer copying.Done(); pump(ptmx, out, shellproto.Data) }()
		}
	} else {
		cmd.SysProcAttr = attrs
		cmd.Stdout = frameWriter{out, shellproto.Data}
		cmd.Stderr = frameWriter{out, shellproto.Stderr}
		cmd.WaitDelay = time.Second // a background process holding the pipes does not hold the session
		if stdin, err = cmd.StdinPipe(); err == nil {
			err = cmd.Start()
		}
	}
	if err != nil {
		if jcg != nil {
			jcg.r.Close()
			jcg.w.Close()
		}
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	pid := cmd.Process.Pid
	if err := jcg.admit(pid); err != nil { // the child was killed: it ran nothing
		cmd.Wait()
		return fmt.Errorf("join the job's cgroup: %w", err)
	}
	t.shells.started(sh, pid)
	if _, err := t.runningTask(req); err != nil {
		sh.tell() // the task ended while the shell started: end it too
		hangUp(pid)
	}
	stopOnEnd := context.AfterFunc(ctx, func() { hangUp(pid) }) // the agent stops
	defer stopOnEnd()
	a.log.Info("shell opened", "job_id", spec.JobID, "rank", spec.Rank, "pid", pid, "tty", req.TTY)

	// Frames from the client: input, resizes, the end of input. When the
	// client goes, the shell is hung up.
	go func() {
		for {
			f, err := shellproto.Read(conn)
			if err != nil {
				hangUp(pid)
				return
			}
			switch f.Type {
			case shellproto.Data:
				stdin.Write(f.Payload)
			case shellproto.Resize:
				if ptmx != nil {
					rows, cols := f.Size()
					pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols})
				}
			case shellproto.EOF:
				if ptmx == nil {
					stdin.Close()
				} else {
					ptmx.Write([]byte{4}) // ^D, as a terminal's end of input
				}
			}
		}
	}()
	cmd.Wait()
	if ptmx != nil {
		// The output the command left in the PTY comes first; a background
		// process that keeps the terminal open does not hold the session.
		drained := make(chan struct{})
		go func() { copying.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(500 * time.Millisecond):
		}
		ptmx.Close()
		copying.Wait()
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if _, err := t.runningTask(req); err != nil {
		sh.tell() // the job's end ended it (its cgroup was killed first)
	}
	a.log.Info("shell closed", "job_id", spec.JobID, "rank", spec.Rank, "exit_code", code)
	out.WriteExit(code)
	return nil
}

// startPTY starts cmd on a new PTY of the request's size, as its
// controlling terminal (fd 0 of a new session), owned by the account the
// shell runs as, and returns the PTY's master.
func startPTY(cmd *osexec.Cmd, req shellproto.Request, attrs *syscall.SysProcAttr, cred *credential) (*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close() // the child has its copy
	if cred != nil {
		if err := tty.Chown(int(cred.uid), -1); err != nil {
			ptmx.Close()
			return nil, fmt.Errorf("give the terminal to the job's account: %w", err)
		}
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: max(req.Rows, 1), Cols: max(req.Cols, 1)}); err != nil {
		ptmx.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = attrs // Setsid, Setctty: Ctty 0 is the tty
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, err
	}
	return ptmx, nil
}

// defaultShell is the shell run when a request names no command.
func defaultShell() string {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// pump copies r into frames of type t until r ends.
func pump(r io.Reader, out *shellproto.Writer, t shellproto.Type) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if out.Write(t, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// frameWriter writes each Write as one frame of its type.
type frameWriter struct {
	out *shellproto.Writer
	t   shellproto.Type
}

func (w frameWriter) Write(p []byte) (int, error) {
	if err := w.out.Write(w.t, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// DialPort connects to a loopback port of this node for the job the
// request names, which must run here: the notebook proxy's stream to a
// notebook server. Only 127.0.0.1 is ever dialed.
func (a *Agent) DialPort(ctx context.Context, req shellproto.Request) (net.Conn, error) {
	if req.Port < 1 || req.Port > 65535 {
		return nil, fmt.Errorf("port %d: want 1 to 65535", req.Port)
	}
	if _, err := a.tasks.runningTask(req); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)))
}
