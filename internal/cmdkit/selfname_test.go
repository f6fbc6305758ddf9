package cmdkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The banners suggest "corral" only where that runs this binary; else the
// path it was run as (the README's ./corral up once printed commands
// that no shell could find).
func TestCliName(t *testing.T) {
	dir := t.TempDir()
	bin, other := filepath.Join(dir, "bin"), filepath.Join(dir, "src")
	for _, d := range []string{bin, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "corral"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	onPath := func(string) (string, error) { return filepath.Join(bin, "corral"), nil }
	noneOnPath := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, c := range []struct {
		name, arg0 string
		look       func(string) (string, error)
		want       string
	}{
		{"found on PATH", "corral", noneOnPath, "corral"},
		{"run by the path of PATH's corral", filepath.Join(bin, "corral"), onPath, "corral"},
		{"run by a path, none on PATH", filepath.Join(other, "corral"), noneOnPath, filepath.Join(other, "corral")},
		{"run by a path, PATH's is another binary", filepath.Join(other, "corral"), onPath, filepath.Join(other, "corral")},
		{"run by a path that does not stat", filepath.Join(other, "gone"), onPath, filepath.Join(other, "gone")},
		{"run as ./corral", "./corral", func(string) (string, error) { return "", errors.New("no") }, "./corral"},
	} {
		if got := cliName(c.arg0, c.look); got != c.want {
			t.Errorf("%s: cliName(%q) = %q; want %q", c.name, c.arg0, got, c.want)
		}
	}
}
