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

// TestShutdownLeavesJobsWithLogFollower stops `corral up` with SIGTERM
// while a job that ignores SIGTERM runs and a client follows its log (as
// `corral logs -f` does). The follower must not hold the shutdown up, and
// the job runs on, untouched (no SIGTERM), for the next server to adopt
// (restart_test.go).
func TestShutdownLeavesJobsWithLogFollower(t *testing.T) {
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

	if processGone(child) {
		t.Errorf("the job's child %d died with the server's graceful shutdown; jobs must outlive it", child)
	}
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "logs", j.ID, "0.log")); err != nil || strings.Contains(string(b), "got-term") {
		t.Errorf("the job's log (%v) shows a SIGTERM from the server's shutdown:\n%s", err, b)
	}
}
