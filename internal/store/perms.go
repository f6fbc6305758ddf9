package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A data directory holds secrets: the jobs' env in the database, its WAL
// and the task specs, their output in the logs, the tokens. Only the
// account that runs Corral may read any of it: directories are 0700,
// files 0600. SecureDataDir corrects what an older Corral (or an umask)
// left more open, at every start.

// Private modes of a data directory's contents.
const (
	privateDir  os.FileMode = 0o700
	privateFile os.FileMode = 0o600
)

// dataFiles are the files a data directory may hold at its top.
var dataFiles = []string{"corral.db", "corral.db-wal", "corral.db-shm", "corral.db-journal", "lock", "join.token", "admin.token"}

// SecureDataDir makes dir (created when missing) private: the directory
// itself 0700, Corral's files at its top 0600, and every directory and
// file under each of trees (e.g. "logs", "state") 0700 and 0600. Nothing
// else under dir is touched, and symbolic links are neither followed nor
// changed. A dir that another account owns, or reaches through its
// symbolic link, is refused before anything in it is touched
// (checkOwnDir). It returns the first error, naming the path.
func SecureDataDir(dir string, trees ...string) error {
	if err := os.MkdirAll(dir, privateDir); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := checkOwnDir(dir, os.Geteuid()); err != nil { // owner.go
		return err
	}
	if err := chmodIf(dir, privateDir); err != nil {
		return err
	}
	for _, name := range dataFiles {
		if err := chmodIf(filepath.Join(dir, name), privateFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, tree := range trees {
		err := filepath.WalkDir(filepath.Join(dir, tree), func(path string, d fs.DirEntry, err error) error {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil
			case err != nil:
				return err
			case d.Type()&fs.ModeSymlink != 0:
				return nil
			case d.IsDir():
				return chmodIf(path, privateDir)
			case d.Type().IsRegular():
				return chmodIf(path, privateFile)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	return nil
}

// chmodIf sets path's permission bits to mode when they differ.
func chmodIf(path string, mode os.FileMode) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm() == mode {
		return nil
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("make private: %w", err)
	}
	return nil
}

// createPrivate creates the database file 0600 when it does not exist,
// and makes it and its -wal and -shm files 0600 when they do.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, privateFile)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := chmodIf(p, privateFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
