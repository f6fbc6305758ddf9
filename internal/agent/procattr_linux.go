package agent

import "syscall"

// sysProcAttr puts a job's shell in a process group of its own, so that it
// and all its children can be signalled together, and has the kernel kill the
// shell should the agent die.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
