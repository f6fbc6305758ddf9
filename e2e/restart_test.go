package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestRestartAdoptsRunningJob restarts `corral up` (SIGTERM, then kill -9)
// while a job runs, on the same data directory and port. The job runs on
// under its shim while no server exists; the restarted server adopts it
// and records its real end: failed with exit code 7, its whole log, one
// attempt, no "lost" event. The job ends either after the restart
// (adopted while it runs) or while the server is down (its shim keeps the
// exit status for the next server).
func TestRestartAdoptsRunningJob(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sig       syscall.Signal
		whileDown bool // the job ends before the server is back
	}{
		{"sigterm", syscall.SIGTERM, false},
		{"sigkill", syscall.SIGKILL, false},
		{"sigterm-ends-while-down", syscall.SIGTERM, true},
		{"sigkill-ends-while-down", syscall.SIGKILL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			dir := t.TempDir()
			gate, pids := filepath.Join(dir, "go"), filepath.Join(dir, "pids")
			// It sleeps until told, then writes 2,000 lines and exits 7.
			j := s.submit(map[string]any{"gpu_count": 1, "max_retries": 2, "command": fmt.Sprintf(
				`echo $$ >> %s; echo before; while [ ! -f %s ]; do sleep 0.05; done; seq 1 2000; echo after; exit 7`,
				shellQuote(pids), shellQuote(gate))})
			s.waitState(j.ID, api.StateRunning, 30*time.Second)
			waitFor(t, 30*time.Second, func() string { return "the job to write its pid" }, func() bool {
				b, _ := os.ReadFile(pids)
				return strings.HasSuffix(string(b), "\n")
			})
			pid := readPIDs(t, pids)[0]

			if err := syscall.Kill(s.PID(), tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.done:
			case <-time.After(30 * time.Second):
				t.Fatalf("corral up did not exit within 30s of %s", tc.sig)
			}
			if processGone(pid) {
				t.Fatalf("the job (pid %d) died with the server (%s)", pid, tc.sig)
			}
			if tc.whileDown {
				openGate(t, gate)
				waitFor(t, 30*time.Second, func() string { return "the job to end while no server runs" }, func() bool {
					return processGone(pid)
				})
			}

			s2 := startServerAt(t, s.DataDir, s.Port)
			if !tc.whileDown {
				if got := s2.job(j.ID); got.State != api.StateRunning {
					t.Errorf("after the restart the job is %s (%s: %s), want running (adopted)", got.State, got.Reason, got.Message)
				}
				openGate(t, gate)
			}
			got := s2.waitTerminal(j.ID, 60*time.Second)
			if got.State != api.StateFailed || got.ExitCode == nil || *got.ExitCode != 7 {
				t.Errorf("the job ended %s (%s: %s), exit code %v; want failed with exit code 7", got.State, got.Reason, got.Message, exitCodeStr(got.ExitCode))
			}
			if got.RetryCount != 0 {
				t.Errorf("retry_count %d: the job was run again", got.RetryCount)
			}
			for _, e := range got.Events {
				if e.Reason == api.ReasonLost {
					t.Errorf("the job has a lost event: %+v", e)
				}
			}
			if p := readPIDs(t, pids); len(p) != 1 {
				t.Errorf("the job ran %d times (pids %v), want once", len(p), p)
			}
			var want strings.Builder
			want.WriteString("before\n")
			for i := 1; i <= 2000; i++ {
				want.WriteString(strconv.Itoa(i) + "\n")
			}
			want.WriteString("after\n")
			if log := s2.logs(j.ID); log != want.String() {
				t.Errorf("the job's log after the restart is %d bytes, want the whole %d: ...%q", len(log), want.Len(), truncate(log, 200))
			}
			// Its GPU is free again.
			s2.waitAllGPUsFree(30 * time.Second)
		})
	}
}

func openGate(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// killInJobCgroups SIGKILLs every process whose cgroup is one of the
// records' attempts (contain.NameOf: JOB.ATTEMPT.RANK, the record's name),
// then removes those cgroups, and their node's parent where it is left
// empty: the shim host that would have was killed.
func killInJobCgroups(records []string) {
	if len(records) == 0 {
		return
	}
	names := map[string]bool{}
	for _, r := range records {
		names[strings.TrimSuffix(filepath.Base(r), ".task")] = true
	}
	defer func() {
		for name := range names {
			dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "corral", "*", name))
			more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "corral", "*", name)) // v2
			for _, dir := range append(dirs, more...) {
				for try := 0; try < 50 && syscall.Rmdir(dir) == syscall.EBUSY; try++ {
					time.Sleep(10 * time.Millisecond) // its killed processes are still exiting
				}
				syscall.Rmdir(filepath.Dir(dir)) // the node's parent, once nothing is under it
			}
		}
	}()
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if names[filepath.Base(line)] {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				break
			}
		}
	}
}

func exitCodeStr(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}

// crashJobs kills what the jobs of a `corral up` on dataDir run, read
// from the tasks' records (DATA/agent/tasks/*.task, JSON lines): the shim
// host first (so that nothing records the jobs' ends), then each job's
// process group, then whatever else runs in the jobs' cgroups (daemons
// that left the group). A server started again finds them gone without
// an exit status (lost), as after its machine went down; and a test that
// ends with jobs running leaves nothing behind (they outlive `corral up`,
// under a shim in their own session).
func crashJobs(dataDir string) {
	records, _ := filepath.Glob(filepath.Join(dataDir, "agent", "tasks", "*.task"))
	var shims, jobs []int
	defer killInJobCgroups(records)
	for _, path := range records {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			var l struct {
				ShimPID int `json:"shim_pid"`
				PID     int `json:"pid"`
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			if l.ShimPID > 1 {
				shims = append(shims, l.ShimPID)
			}
			if l.PID > 1 {
				jobs = append(jobs, l.PID)
			}
		}
	}
	for _, pid := range shims {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range jobs {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
