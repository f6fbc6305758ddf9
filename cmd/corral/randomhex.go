package main

import (
	"crypto/rand"
	"encoding/hex"
)

// randomHex returns n random bytes in hex: a fresh idempotency key.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
