package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// newHostedTasks is newTasks for the in-process agent of `corral up`:
// unfenced, its jobs run through one shim host (this test binary).
func newHostedTasks(t *testing.T, dir string) *tasks {
	ts := newTasks(t, dir, 0)
	ts.unfenced = true
	os.MkdirAll(ts.stateDir, 0o755)
	return ts
}

// One shim host runs every job: each reports its own exit code and output
// (no job holds the host's reports pipe), and all their records' shim_pid
// name the same host.
func TestShimHostRunsEveryJob(t *testing.T) {
	ts := newHostedTasks(t, t.TempDir())
	defer ts.host.close()
	for i := range 5 {
		ts.start(api.TaskSpec{JobID: fmt.Sprintf("j%d", i), Command: fmt.Sprintf("echo out-%d $CORRAL_JOB_ID; [ -e /dev/fd/3 ] && echo the reports pipe leaked; exit %d", i, 10+i)})
	}
	hosts := map[string]bool{}
	for i := range 5 {
		id := fmt.Sprintf("j%d", i)
		st := waitTask(t, ts, id+" to end", func(s api.TaskStatus) bool { return s.JobID == id && s.State == api.TaskExited })
		if st.ExitCode != 10+i || st.Error != "" {
			t.Errorf("%s ended %+v; want exit %d", id, st, 10+i)
		}
		k := taskKey{id, 0, 0}
		if b, _ := os.ReadFile(ts.logPath(k)); string(b) != fmt.Sprintf("out-%d %s\n", i, id) {
			t.Errorf("%s log %q", id, b)
		}
		r, _ := readRecord(recordPath(ts.stateDir, k))
		hosts[strconv.Itoa(r.ShimPID)] = true
	}
	if len(hosts) != 1 {
		t.Errorf("the jobs' records name %d shim processes, want one host: %v", len(hosts), hosts)
	}
}

// The agent goes (the host's stdin ends) while a job runs: the job runs
// on, a new agent adopts it and reports its real exit code and whole log,
// and the old host exits once its job has ended.
func TestShimHostOutlivesItsAgent(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	first := newHostedTasks(t, dir)
	first.start(api.TaskSpec{JobID: "j1", Attempt: 1, Command: "echo before; while [ ! -e " + release + " ]; do sleep 0.02; done; echo after; exit 7"})
	pid := waitTask(t, first, "the job to run", func(s api.TaskStatus) bool { return s.PID > 0 }).PID
	r, _ := readRecord(recordPath(first.stateDir, taskKey{"j1", 1, 0}))
	host := r.ShimPID
	first.host.close()
	// The host has read all its input, and says so by closing it: a
	// restarted agent can tell a request it never took from one in the
	// pipe (hostDrained).
	if !hostDrained(first.stateDir) {
		t.Errorf("the shim host %d still reads its input after its agent closed it", host)
	}

	second := newHostedTasks(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := second.adopt(ctx); n != 1 {
		t.Fatalf("adopted %d tasks; want 1", n)
	}
	if st := second.statuses(); len(st) != 1 || st[0].State != api.TaskRunning || st[0].PID != pid {
		t.Fatalf("adopted %+v; want it running as pid %d", st, pid)
	}
	if !alive(host) {
		t.Fatalf("the shim host %d exited while its job runs", host)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := waitTask(t, second, "the adopted job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 7 || st.Error != "" {
		t.Errorf("adopted job ended %+v; want exit 7", st)
	}
	if b, _ := os.ReadFile(second.logPath(taskKey{"j1", 1, 0})); string(b) != "before\nafter\n" {
		t.Errorf("log %q; want the output from before and after the adoption", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(host) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if alive(host) {
		t.Errorf("the shim host %d still runs after its agent went and its last job ended", host)
	}
}
