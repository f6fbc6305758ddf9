package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Lock takes an exclusive lock on dir, so that two servers never share one
// store. The kernel drops the lock when the process dies, kill -9 included.
// Release it with the returned function. A dir of another account's, or a
// lock file that is a symbolic link, is refused.
func Lock(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	// Before anything is written there: another account's dir could hold
	// a "lock" that links to a file of root's, which root would truncate.
	if err := checkOwnDir(dir, os.Geteuid()); err != nil { // owner.go
		return nil, err
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("%w: %s (pid %s)", ErrLocked, dir, string(holder))
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	return func() { f.Close() }, nil
}
