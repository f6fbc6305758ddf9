package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// SecureDataDir makes a data dir left open (0755 and 0644) private, its
// database, tokens and log trees included, without following links or
// touching files it does not own.
func TestSecureDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, nil, 0o644)
	files := []string{"corral.db", "corral.db-wal", "admin.token", "logs/j1/0.log", "logs/j1/1.rank1.log", "state/tasks/j1.0.0/spec.json"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("secret"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)     // not Corral's: left alone
	os.Symlink(outside, filepath.Join(dir, "logs", "j1", "link")) // not followed
	os.Chmod(dir, 0o755)
	if err := SecureDataDir(dir, "logs", "state"); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{"": 0o700, "logs": 0o700, "logs/j1": 0o700, "state/tasks/j1.0.0": 0o700, "notes.txt": 0o644}
	for _, f := range files {
		want[f] = 0o600
	}
	for f, m := range want {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
		} else if fi.Mode().Perm() != m {
			t.Errorf("%s: %v, want %v", f, fi.Mode().Perm(), m)
		}
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target was changed to %v", fi.Mode().Perm())
	}
}

// A new database and its WAL are 0600 whatever the umask allows.
func TestOpenPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want 0600", p, fi.Mode().Perm())
		}
	}
}
