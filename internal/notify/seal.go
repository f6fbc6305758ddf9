package notify

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// KeyFile is the name of the sealing key in the data dir.
const KeyFile = "notify.key"

// Sealer encrypts endpoint secrets (URLs, webhook secrets, addresses) with
// AES-256-GCM under a key kept in a file of the data dir (mode 0600),
// made on first use. A database copied without that file holds no
// usable secret.
type Sealer struct {
	aead cipher.AEAD
}

// OpenSealer reads the key at path, creating it (32 random bytes, hex,
// mode 0600) when there is none.
func OpenSealer(path string) (*Sealer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		var k [32]byte
		if _, err := rand.Read(k[:]); err != nil {
			return nil, fmt.Errorf("notify key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("notify key: %w", err)
		}
		if _, err := f.WriteString(hex.EncodeToString(k[:]) + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("notify key: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("notify key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("notify key: %w", err)
		}
		return NewSealer(k[:])
	}
	if err != nil {
		return nil, fmt.Errorf("notify key: %w", err)
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("notify key %s: want 64 hex digits", path)
	}
	return NewSealer(k)
}

// NewSealer returns a sealer with a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("notify key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("notify key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts s; "" stays "".
func (s *Sealer) Seal(plain string) (string, error) {
	if plain == "" {
		return "", nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	return base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(plain), nil)), nil
}

// Open decrypts what Seal made; "" stays "".
func (s *Sealer) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", errors.New("open: not a sealed value")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:n], b[n:], nil)
	if err != nil {
		return "", fmt.Errorf("open: %w (was notify.key replaced?)", err)
	}
	return string(plain), nil
}
