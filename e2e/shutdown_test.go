package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestShutdownStopsJobsWithLogFollower stops `corral up` with SIGTERM
// while a job that ignores SIGTERM runs and a client follows its log (as
// `corral logs -f` does). The server must still stop the job as a cancel
// does (SIGTERM, grace, SIGKILL): no process of the job may outlive it.
func TestShutdownStopsJobsWithLogFollower(t *testing.T) {
	s := startServer(t) // --cancel-grace 2s
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child.pid")
	j := s.submit(map[string]any{
		"gpu_count": 1,
		"command": fmt.Sprintf(`trap 'echo got-term' TERM
(trap '' TERM; exec sleep 300) &
echo $! > %s
echo started
while :; do wait; done`, shellQuote(childPID)),
	})
	s.waitState(j.ID, api.StateRunning, 30*time.Second)

	resp, err := s.http.Get(s.URL + "/jobs/" + j.ID + "/logs?follow=true")
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("follow: first line %q, %v", line, err)
	}
	child := readPIDs(t, childPID)[0]

	began := time.Now()
	if err := syscall.Kill(s.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("corral up did not exit within 30s of SIGTERM")
	}
	t.Logf("corral up exited %v after SIGTERM", time.Since(began).Round(time.Millisecond))

	// Once the server is gone nothing else will stop the child: give init a
	// moment to reap it, no more.
	deadline := time.Now().Add(3 * time.Second)
	for !processGone(child) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if !processGone(child) {
		syscall.Kill(child, syscall.SIGKILL)
		t.Errorf("the job's child %d (it ignores SIGTERM) outlived the server's graceful shutdown: "+
			"the grace period was not followed by SIGKILL", child)
	}
	// SIGTERM came first, so the job could save its work.
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "logs", j.ID, "0.log")); err != nil || !strings.Contains(string(b), "got-term") {
		t.Errorf("the job's log (%v) does not show the SIGTERM it should get before SIGKILL:\n%s", err, b)
	}
}
