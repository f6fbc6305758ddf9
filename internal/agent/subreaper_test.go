package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// What a job leaves behind when it exits (a double-forked daemon, its
// parent gone: an orphan) is killed with the job, by its process group
// or its cgroup, and then reaped by the shim that ran the job (a child
// subreaper), not left a zombie for a PID 1 that may never reap it (each
// one charged to the node's pids cgroup). The jobs' own exit codes are
// not taken by that reaping: several jobs end at once, each with its own.
func TestShimReapsWhatJobsLeave(t *testing.T) {
	tests := []struct {
		name    string
		hosted  bool // the shim host of corral up; else a one-job shim per job
		cgroups bool // the daemon escapes its job's group (setsid): the cgroup kills it
	}{
		{"shim host, process group", true, false},
		{"one-job shim, process group", false, false},
		{"shim host, cgroup", true, true},
		{"one-job shim, cgroup", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cgroups && os.Geteuid() != 0 {
				t.Skip("needs root: cgroups cannot be written here")
			}
			dir := t.TempDir()
			ts := newTasks(t, dir, 0)
			if tc.hosted {
				ts = newHostedTasks(t, dir)
				defer ts.host.close()
			}
			var pidsDir string
			if tc.cgroups {
				pidsDir = nodePidsDir(t, containTasks(t, ts, dir))
			}
			os.MkdirAll(ts.stateDir, 0o755)
			setsid := ""
			if tc.cgroups {
				setsid = "setsid "
			}
			const jobs = 4
			pidFiles, parentFiles := make([]string, jobs), make([]string, jobs)
			for i := range jobs {
				pidFiles[i] = filepath.Join(dir, fmt.Sprintf("daemon%d", i))
				parentFiles[i] = filepath.Join(dir, fmt.Sprintf("parent%d", i))
				// The subshell forks the daemon and exits (the job waits
				// for it): the daemon is an orphan. The job writes down
				// who adopted it, and exits.
				ts.start(api.TaskSpec{JobID: fmt.Sprintf("j%d", i), Command: fmt.Sprintf(
					`( %ssh -c 'echo $$ > %s; exec sleep 1000' & ); while [ ! -s %s ]; do sleep 0.02; done; cut -d' ' -f4 /proc/$(cat %s)/stat > %s; exit %d`,
					setsid, pidFiles[i], pidFiles[i], pidFiles[i], parentFiles[i], 10+i)})
			}
			for i := range jobs {
				id := fmt.Sprintf("j%d", i)
				st := waitTask(t, ts, id+" to end", func(s api.TaskStatus) bool { return s.JobID == id && s.State == api.TaskExited })
				if st.ExitCode != 10+i || st.Error != "" {
					t.Errorf("%s ended %+v; want exit %d", id, st, 10+i)
				}
			}
			for i := range jobs {
				pid, parent := readPid(pidFiles[i]), readPid(parentFiles[i])
				r, _ := readRecord(recordPath(ts.stateDir, taskKey{fmt.Sprintf("j%d", i), 0, 0}))
				if pid <= 0 || parent != r.ShimPID {
					t.Errorf("job %d's orphan %d was adopted by %d; want its shim %d", i, pid, parent, r.ShimPID)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					state, ppid, ok := procState(pid)
					if !ok {
						break // reaped
					}
					if time.Now().After(deadline) {
						t.Fatalf("job %d's orphan %d is left in state %s with parent %d, its job ended", i, pid, state, ppid)
					}
					time.Sleep(10 * time.Millisecond) // poll interval: the kill, then the reaping
				}
			}
			if pidsDir == "" {
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				b, err := os.ReadFile(filepath.Join(pidsDir, "pids.current"))
				if err != nil || strings.TrimSpace(string(b)) == "0" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the node's pids cgroup still counts %s processes after its jobs ended", strings.TrimSpace(string(b)))
				}
				time.Sleep(10 * time.Millisecond) // poll interval: the cgroups' removal
			}
		})
	}
}

// readPid reads a number from a file; 0 when it holds none.
func readPid(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// procState reads a process's state letter and parent from /proc; false
// when there is no such process (reaped).
func procState(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:])) // state ppid ...
	if len(f) < 2 {
		return "", 0, true
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// nodePidsDir is the node cgroup parent's directory in the pids
// hierarchy (v1), or itself (v2); "" where it has none.
func nodePidsDir(t *testing.T, parent string) string {
	t.Helper()
	sub := "pids"
	if contain.Mode() == contain.CgroupV2 {
		sub = ""
	}
	own, err := cgroups.GetOwnCgroupPath(sub)
	if err != nil {
		return ""
	}
	return filepath.Join(own, parent)
}
