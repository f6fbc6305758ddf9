package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A descriptor opened without close-on-exec (as one inherited from a shell
// would be) is close-on-exec afterwards, and stdin, stdout and stderr are
// left as they are.
func TestCloseInheritedOnExec(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inherited")
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_WRONLY, 0o600) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cloexec := func(fd int) bool {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno != 0 {
			t.Fatalf("fcntl(%d): %v", fd, errno)
		}
		return flags&syscall.FD_CLOEXEC != 0
	}
	if cloexec(fd) {
		t.Fatal("the test descriptor is close-on-exec already")
	}
	stdin := cloexec(int(os.Stdin.Fd()))
	closeInheritedOnExec()
	if !cloexec(fd) {
		t.Errorf("an inherited descriptor would pass on to jobs: not close-on-exec")
	}
	if cloexec(int(os.Stdin.Fd())) != stdin {
		t.Errorf("stdin's close-on-exec flag changed")
	}
}
