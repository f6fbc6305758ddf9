package auth

import (
	"fmt"
	"net"
	"syscall"
)

// PeerCred returns the credentials the kernel recorded for the process at
// the other end of a Unix socket connection (SO_PEERCRED: its uid, gid
// and pid when it connected). The caller cannot forge them, which is what
// lets a login socket sign a local user in without a secret.
func PeerCred(c net.Conn) (Cred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, fmt.Errorf("peer credentials: %T is not a Unix socket connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", serr)
	}
	return Cred{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
