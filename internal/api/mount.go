package api

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ParseMount splits a job's bind mount, SRC:DST[:ro|:rw], into
// its host directory, its path in the container and whether it is
// read-only. Both paths must be absolute and clean, and hold none of the
// characters the container runtime's own syntax splits on (':' and ',').
// DST must not be / nor under /proc, /sys or /dev.
func ParseMount(m string) (src, dst string, ro bool, err error) {
	parts := strings.Split(m, ":")
	switch {
	case len(parts) == 3 && parts[2] == "ro":
		ro = true
	case len(parts) == 3 && parts[2] == "rw":
	case len(parts) == 2:
	default:
		return "", "", false, fmt.Errorf("%q is not SRC:DST[:ro] (absolute paths, without ':')", clipText(m))
	}
	src, dst = parts[0], parts[1]
	for _, p := range []string{src, dst} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsAny(p, ",\x00\n") {
			return "", "", false, fmt.Errorf("%q: %q is not an absolute, clean path without ','", clipText(m), clipText(p))
		}
	}
	if dst == "/" || underDir(dst, "/proc") || underDir(dst, "/sys") || underDir(dst, "/dev") {
		return "", "", false, fmt.Errorf("%q: cannot mount over %s", clipText(m), dst)
	}
	return src, dst, ro, nil
}

// under reports whether p is dir or below it.
func underDir(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
