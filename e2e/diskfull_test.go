package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// diskFullTTL is the --node-ttl of the server whose disk fills.
const diskFullTTL = 3 * time.Second

// mountTmpfs mounts a tmpfs of size at a fresh directory and unmounts it
// at the test's end, after the servers on it are stopped (cleanups run
// last-in first-out: call it before starting them).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; unmounting lazily", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// fillDisk writes zeros to a file under dir until its file system is full
// (ENOSPC) and returns the file.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	fill := filepath.Join(dir, "fill")
	exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=1M").Run() // ends with ENOSPC, as wanted
	f, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.Write(make([]byte, 64<<10))
		f.Close()
		os.Remove(filepath.Join(dir, "probe"))
	}
	if err == nil {
		t.Fatalf("the disk under %s is not full after dd", dir)
	}
	return fill
}

// A full data disk kills no running job and loses nothing acknowledged.
// `corral up` with its data dir on a small tmpfs and a short --node-ttl
// runs four jobs that print for about 20 s; the tmpfs is filled to ENOSPC
// for three TTLs, during which a submission is refused with 503
// store_unavailable (or, where the store could still write it,
// acknowledged), reads go on, and the jobs run on (their output is lost
// with a marker, not the jobs). Once the disk is freed, the jobs complete
// in their first attempt with exit 0, every submission acknowledged is
// there and runs, and new submissions go through.
func TestFullDiskKillsNoJob(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	mnt := mountTmpfs(t, "64m")
	s := startControl(t, filepath.Join(mnt, "data"), freePort(t), nil, "up", "--simulate-gpus", "4", "--node-name", "e2e-node",
		"--node-ttl", diskFullTTL.String(), "--heartbeat", "500ms")
	var running []string
	for range 4 {
		j := s.submit(map[string]any{"command": "for i in $(seq 1 40); do echo tick $i; sleep 0.5; done; echo finished", "gpu_count": 1})
		running = append(running, j.ID)
	}
	// One more ends while the disk is full, with an exit code of its own.
	hold := t.TempDir()
	short := s.submit(map[string]any{"command": "echo begun; " + holdCmd(hold, "short") + "; echo ending; exit 3", "gpu_count": 0})
	for _, id := range append(running, short.ID) {
		s.waitState(id, api.StateRunning, 30*time.Second)
	}

	fill := fillDisk(t, mnt)
	var acked []string
	refused := 0
	full := time.Now()
	for end := time.Now().Add(3*diskFullTTL + time.Second); time.Now().Before(end); {
		if time.Since(full) > diskFullTTL && !fileExists(filepath.Join(hold, "release-short")) {
			release(t, hold, "short")
		}
		key := fmt.Sprintf("full-%d", time.Now().UnixNano())
		r := s.do("POST", "/queue/submit", map[string]any{"command": "echo queued while full", "gpu_count": 0}, map[string]string{"Idempotency-Key": key})
		switch r.Status {
		case http.StatusCreated:
			var j api.Job
			if err := json.Unmarshal(r.Body, &j); err != nil || j.ID == "" {
				t.Fatalf("a 201 while the disk is full without a job: %s", r)
			}
			acked = append(acked, j.ID)
		case http.StatusServiceUnavailable:
			if e := errorBody(t, r); e.Code != "store_unavailable" {
				t.Fatalf("a refusal while the disk is full: %s; want 503 store_unavailable", r)
			}
			refused++
		default:
			t.Fatalf("a submission while the disk is full: %s; want 201, or 503 store_unavailable", r)
		}
		for _, id := range running {
			if j := s.job(id); j.State != api.StateRunning { // reads go on
				t.Fatalf("job %s while the disk is full: %s (%s: %s); want running", id, j.State, j.Reason, j.Message)
			}
		}
		time.Sleep(500 * time.Millisecond) // the pace of a user retrying
	}
	if refused == 0 {
		t.Fatalf("no submission was refused in %s of a full disk (%d acknowledged)", 3*diskFullTTL, len(acked))
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}

	// The TTL of the server's attention that follows is when a stall would
	// show: the jobs must still run then.
	after := s.submitWhenWritable(30 * time.Second)
	time.Sleep(diskFullTTL + time.Second) // nothing to await: a loss would show within it
	for _, id := range running {
		if j := s.job(id); j.State != api.StateRunning || j.RetryCount != 0 {
			t.Fatalf("job %s after the disk was freed: %s (%s: %s), retry %d; want running in its first attempt", id, j.State, j.Reason, j.Message, j.RetryCount)
		}
	}
	for _, id := range running {
		j := s.waitState(id, api.StateCompleted, 60*time.Second)
		if j.RetryCount != 0 || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("job %s: retry %d, exit %v; want exit 0 in its first attempt", id, j.RetryCount, j.ExitCode)
		}
		if log := s.logs(id); !strings.Contains(log, "finished") {
			t.Errorf("job %s's log has no end: %q", id, truncate(log, 400))
		}
	}
	// The job that ended while the disk was full is settled with its own
	// exit code: its end was not lost with the disk.
	if j := s.waitTerminal(short.ID, 30*time.Second); j.State != api.StateFailed || j.Reason != api.ReasonExitCode || j.ExitCode == nil || *j.ExitCode != 3 || j.RetryCount != 0 {
		t.Errorf("the job that ended while the disk was full: %s (%s: %s), exit %v, retry %d; want failed with its exit code 3",
			j.State, j.Reason, j.Message, j.ExitCode, j.RetryCount)
	}
	for _, id := range append(acked, after) {
		if j := s.waitTerminal(id, 60*time.Second); j.State != api.StateCompleted {
			t.Errorf("job %s, acknowledged while or after the disk was full: %s (%s: %s); want completed", id, j.State, j.Reason, j.Message)
		}
	}
	t.Logf("%d submissions refused (503) and %d acknowledged during %s of a full disk", refused, len(acked), 3*diskFullTTL)
}

// submitWhenWritable submits a job of no GPUs until one is acknowledged
// (the store writes again) and returns its id.
func (s *server) submitWhenWritable(timeout time.Duration) string {
	s.t.Helper()
	var id string
	waitFor(s.t, timeout, func() string { return "a submission to be acknowledged once the disk was freed" }, func() bool {
		r := s.do("POST", "/queue/submit", map[string]any{"command": "echo after", "gpu_count": 0}, nil)
		var j api.Job
		if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &j) != nil {
			return false
		}
		id = j.ID
		return true
	})
	return id
}
