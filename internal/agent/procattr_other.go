//go:build unix && !linux

package agent

import "syscall"

// sysProcAttr puts a job's shell in a process group of its own, so that it
// and all its children can be signalled together.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
