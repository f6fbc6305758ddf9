package main

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every file descriptor above stderr that this
// process holds as close-on-exec. Go opens its own files that way, but a
// descriptor inherited from whatever started Corral (a shell's 7>file, a
// supervisor's pipe, a file a root script opened) is not, and would pass on
// to every job the agent starts, as whatever account the job runs as: a
// job of another user could then read or write what root opened. Files
// handed to a child on purpose (exec.Cmd.ExtraFiles, such as the gate of
// a contained job) are unaffected: they are duplicated into place for that
// child. Without /proc it does nothing.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
