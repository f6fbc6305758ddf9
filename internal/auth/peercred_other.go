//go:build !linux

package auth

import (
	"errors"
	"net"
)

// PeerCred is supported on Linux only (SO_PEERCRED).
func PeerCred(net.Conn) (Cred, error) {
	return Cred{}, errors.New("peer credentials: the login socket needs Linux (SO_PEERCRED)")
}
