package auth

// Cred is a local caller's identity as the kernel knows it (PeerCred).
type Cred struct {
	UID, GID uint32
	PID      int32
}
