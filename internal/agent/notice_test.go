package agent

import (
	"os"
	"os/user"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// A job run as another account than the agent's (here nobody) reads its
// preemption notice, though the data dir is private; the notice's own
// directory goes when the task is forgotten.
func TestNoticeReachesAJobRunAsAnotherAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent switches users")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody")
	}
	dir := t.TempDir()
	ts := newTasks(t, dir, 0)
	ts.runAs, ts.runAsFallback = RunAsUser, "nobody"
	os.MkdirAll(ts.stateDir, 0o700)
	spec := api.TaskSpec{JobID: "j1", User: "no-such-account-here", Workdir: "/",
		Command: `id -un; while [ ! -f "$CORRAL_PREEMPT_NOTICE" ]; do sleep 0.05; done; cat "$CORRAL_PREEMPT_NOTICE"`}
	ts.start(spec)
	waitTask(t, ts, "the job to run", func(s api.TaskStatus) bool { return s.PID > 0 || s.State == api.TaskExited })
	k := keyOf(spec)
	notice := ts.noticeOf(k)
	if strings.HasPrefix(notice, dir) {
		t.Fatalf("notice %s is under the private data dir", notice)
	}
	ts.stop(k, -1, "preempted for j2")
	st := waitTask(t, ts, "the job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	b, _ := os.ReadFile(ts.logPath(k))
	if st.ExitCode != 0 || string(b) != "nobody\npreempted for j2" {
		t.Errorf("job %+v, output %q; want nobody reading its notice", st, b)
	}
	ts.forget(k)
	if _, err := os.Stat(notice); !os.IsNotExist(err) {
		t.Errorf("notice left behind: %v", err)
	}
}
