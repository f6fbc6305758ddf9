package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A job that ends while the data dir's disk is full is settled with its
// real exit status, not lost for want of a page: its record keeps room
// for its last lines from its creation (reserveRecord), so they are
// written at once; where no room was kept, the shim writes the exit line
// once the disk has room again, and readers skip what a failed write tore.
// The record is made so that its exit line must start a new page.
func TestExitRecordedOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	for _, tc := range []struct {
		name     string
		reserved bool // made by createRecord; else without the reservation
	}{
		{"room kept at creation", true},
		{"no room kept: the shim waits for room", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
				t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
			path := filepath.Join(dir, "tasks", "j1.0.0"+recordExt)
			page := int64(os.Getpagesize())
			create := func(n int) int64 {
				spec := api.TaskSpec{JobID: "j1", Command: strings.Repeat("x", n)}
				var err error
				if tc.reserved {
					err = createRecord(path, record{Spec: &spec})
				} else {
					os.MkdirAll(filepath.Dir(path), 0o700)
					err = writeRecord(path, record{Spec: &spec}, os.O_CREATE|os.O_TRUNC)
				}
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				return fi.Size()
			}
			size := create(1000)
			want := 2*page - 16 // the pid line fits in the page; the exit line does not
			size = create(1000 + int(want-size))
			if size != want {
				t.Fatalf("record of %d bytes; want %d", size, want)
			}
			fill := filepath.Join(dir, "fill")
			fillUp(t, fill)

			if err := appendRecord(path, record{PID: 4242}); err != nil {
				t.Fatalf("the pid line on a full disk: %v", err)
			}
			st := exitStatus{ExitCode: 3, FinishedAt: time.Now().UTC()}
			if tc.reserved {
				if err := writeExit(path, st); err != nil {
					t.Fatalf("the exit line on a full disk, room kept: %v", err)
				}
			} else {
				done := make(chan error, 1)
				go func() { done <- shimWriteExit(path, st) }()
				select {
				case err := <-done:
					t.Fatalf("the exit line was written (%v) on a full disk without room kept: the test did not fill it", err)
				case <-time.After(exitRetry + exitRetry/2): // it has tried twice
				}
				if err := os.Remove(fill); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(5 * exitRetry):
					t.Fatal("the exit line was not written once the disk had room")
				}
			}
			got, ok := readExit(path)
			if !ok || got.ExitCode != 3 {
				b, _ := os.ReadFile(path)
				t.Fatalf("exit read back %+v %v; want exit 3; record's tail %q", got, ok, b[max(0, len(b)-200):])
			}
			if r, _ := readRecord(path); r.PID != 4242 || r.Spec == nil {
				t.Fatalf("record read back %+v", r)
			}
		})
	}
}

// fillUp writes zeros to path until its file system is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
}
