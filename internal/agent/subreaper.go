package agent

import (
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A shim (a one-job shim, or the shim host) is a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER): what its jobs leave behind when they
// exit (a double-forked daemon, a process whose parent died first) is
// reparented to it, not to PID 1. It reaps those orphans once they end,
// typically when the job's process group or cgroup is killed at the job's
// end. Without it, a PID 1 that does not reap (a container's, some
// machines') keeps them as zombies, each charged to the node's pids
// cgroup (--max-pids-per-node) for good.
//
// The shim's own children, the jobs it starts with os/exec, are waited
// for by exec.Cmd.Wait: the reaper must not take their exit statuses. It
// never waits for any child (wait4(-1) would race Cmd.Wait): it peeks at
// the next ended child with waitid(P_ALL, WEXITED|WNOWAIT), which leaves
// it a zombie, and reaps it by its pid only when it is no job process it
// started (known). A job process is known from its fork (starts hold
// started for reading from before the fork until its pid is known) until
// its Wait has returned (forget, which looks again: an orphan's end may
// have queued behind the job's).

// subreaper reaps the orphans reparented to this process. A nil
// *subreaper (prctl refused) starts commands and reaps nothing.
type subreaper struct {
	started sync.RWMutex // read: a start, from before the fork to its pid in known; write: an orphan's reaping
	mu      sync.Mutex   // guards known
	known   map[int]bool // pids of job processes started here and not yet waited for
	poke    chan struct{}
}

// newSubreaper makes this process a child subreaper and starts reaping its
// orphans; nil (with a line on stderr) where the kernel refuses.
func newSubreaper() *subreaper {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "corral shim: not a child subreaper, so what jobs leave behind goes to PID 1: %v\n", err)
		return nil
	}
	r := &subreaper{known: map[int]bool{}, poke: make(chan struct{}, 1)}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	go func() {
		for {
			select {
			case <-sig:
			case <-r.poke:
			}
			r.reap()
		}
	}()
	return r
}

// start starts cmd; its process is known until forget.
func (r *subreaper) start(cmd *osexec.Cmd) error {
	if r == nil {
		return cmd.Start()
	}
	r.started.RLock()
	defer r.started.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.mu.Lock()
	r.known[cmd.Process.Pid] = true
	r.mu.Unlock()
	return nil
}

// forget is called once cmd.Wait has returned for pid: what ended behind
// it is looked at.
func (r *subreaper) forget(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.known, pid)
	r.mu.Unlock()
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

func (r *subreaper) isKnown(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known[pid]
}

// siPidOffset is where si_pid lies in a siginfo_t: after si_signo,
// si_errno and si_code, at the union's alignment (a pointer's).
const siPidOffset = (3*unsafe.Sizeof(int32(0)) + unsafe.Alignof(uintptr(0)) - 1) &^ (unsafe.Alignof(uintptr(0)) - 1)

// nextEnded is the pid of a child that has ended and is not yet reaped,
// left as it is (WNOWAIT); 0 when none has; -1 when this process has no
// children at all.
func nextEnded() int {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return -1 // ECHILD
		}
		return int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), siPidOffset)))
	}
}

// reap reaps the ended children that are no job process of this shim.
// It stops at an ended job process: its Wait reaps it, and forget brings
// the reaper back.
func (r *subreaper) reap() {
	for {
		pid := nextEnded()
		if pid <= 0 || r.isKnown(pid) {
			return
		}
		// An unknown pid may be a job process between its fork and its
		// pid in known: wait for the starts in flight.
		r.started.Lock()
		if !r.isKnown(pid) {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil) // ECHILD: a failed start's, reaped by os/exec
		}
		r.started.Unlock()
	}
}

// drain reaps, before a shim exits, the orphans that are ending (those of
// its job, killed with it): up to wait for one still running. Whatever
// outlives that goes to the next subreaper or PID 1 when the shim exits.
func (r *subreaper) drain(wait time.Duration) {
	if r == nil {
		return
	}
	deadline := time.Now().Add(wait)
	for {
		r.reap()
		if nextEnded() < 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond) // poll interval: a killed process's exit
	}
}
