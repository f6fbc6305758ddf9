// Package diskfree reads how full a file system is.
package diskfree

import (
	"fmt"
	"syscall"
)

// Percent is the share of the file system holding path that an
// unprivileged process may still write, in percent.
func Percent(path string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("free disk of %s: %w", path, err)
	}
	if st.Blocks == 0 {
		return 100, nil
	}
	return float64(st.Bavail) * 100 / float64(st.Blocks), nil
}
