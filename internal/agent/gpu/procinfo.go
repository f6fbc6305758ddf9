package gpu

import (
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// processOwner returns the user name (or uid) owning a process, "" when
// /proc does not tell.
func processOwner(pid int) string {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	uid := strconv.Itoa(int(st.Uid))
	if u, err := user.LookupId(uid); err == nil {
		return u.Username
	}
	return uid
}

// processName returns a process's command name, "" when unknown.
func processName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
