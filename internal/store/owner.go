package store

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwnDir refuses a data directory that another account owns, or that
// is reached through a symbolic link another account owns: that account
// could read the secrets Corral keeps there whatever their modes, rename
// them, or put its own admin.token, join.token or corral.db in their place
// (a directory pre-made under /tmp, say, where the admin then runs corral
// up). euid is the account Corral runs as.
func checkOwnDir(dir string, euid int) error {
	for _, stat := range []func(string) (os.FileInfo, error){os.Lstat, os.Stat} {
		fi, err := stat(dir)
		if err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) == euid {
			continue
		}
		what := "is owned by"
		if fi.Mode()&os.ModeSymlink != 0 {
			what = "is a symbolic link owned by"
		}
		return fmt.Errorf("data dir: %s %s uid %d, not by the account Corral runs as (uid %d): that account could read or replace the secrets kept there; "+
			"use a directory of your own (or chown it)", dir, what, st.Uid, euid)
	}
	return nil
}
