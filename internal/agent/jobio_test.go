package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A batch script runs with its own #! line, its arguments after it; its
// stdout and stderr reach the attempt's log and the -o and -e files, and
// the script file is executable by the job alone.
func TestBatchScriptWithOutputFiles(t *testing.T) {
	dir := t.TempDir()
	ts := newTasks(t, dir, 0)
	ts.tee = []string{"env", "CORRAL_AGENT_TEST_SHIM=1", os.Args[0], "--tee"}
	os.MkdirAll(ts.stateDir, 0o755)
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	script := "#!/bin/sh\n# not bash: $0 is the script\necho \"out $# $1 $2 $(basename $0 | cut -c1-3)\"\necho err >&2\nexit 4\n"
	ts.start(api.TaskSpec{JobID: "j1", Command: "'a b' c", Script: script, Workdir: work, Output: "o-j1.log", Error: filepath.Join(work, "e-j1.log")})
	st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 4 || st.Error != "" {
		t.Fatalf("status %+v; want the script's exit 4", st)
	}
	log, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0}))
	if !strings.Contains(string(log), "out 2 a b c 0.s") || !strings.Contains(string(log), "err\n") {
		t.Errorf("log %q; want the script's output, arguments as given", log)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "o-j1.log")); string(b) != "out 2 a b c 0.s\n" {
		t.Errorf("-o file %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "e-j1.log")); string(b) != "err\n" {
		t.Errorf("-e file %q", b)
	}
	fi, err := os.Stat(ts.attemptFile(taskKey{"j1", 0, 0}, ".script"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("script file %v %v; want mode 0700", fi, err)
	}
}

// Without -e, stderr goes to the -o file too; a job killed by a signal
// ends so through the tee.
func TestOutputFileTakesStderrAndSignalEnd(t *testing.T) {
	dir := t.TempDir()
	ts := newTasks(t, dir, 0)
	ts.tee = []string{"env", "CORRAL_AGENT_TEST_SHIM=1", os.Args[0], "--tee"}
	os.MkdirAll(ts.stateDir, 0o755)
	out := filepath.Join(dir, "both.log")
	ts.start(api.TaskSpec{JobID: "j2", Command: "echo one; echo two >&2; kill -USR2 $$", Workdir: dir, Output: out})
	st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 128+12 {
		t.Errorf("status %+v; want killed by SIGUSR2 (140)", st)
	}
	// stdout and stderr come through two pipes: each line whole, in
	// either order.
	b, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"one", "two"}) {
		t.Errorf("-o file %q; want stdout and stderr", b)
	}
}

// --signal: the job gets its signal SignalAfter from its start, before
// its limit; B: sends it to the main process only, through the tee.
func TestSignalBeforeTheLimit(t *testing.T) {
	for _, c := range []struct{ name, signal string }{{"group", "USR1"}, {"batch through the tee", "B:USR1"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ts := newTasks(t, dir, 0)
			ts.tee = []string{"env", "CORRAL_AGENT_TEST_SHIM=1", os.Args[0], "--tee"}
			os.MkdirAll(ts.stateDir, 0o755)
			start := time.Now()
			ts.start(api.TaskSpec{JobID: "j3", Command: "trap 'echo got-usr1; exit 0' USR1; while :; do sleep 0.05; done",
				Workdir: dir, Output: filepath.Join(dir, "o.log"), Signal: c.signal, SignalAfter: 1})
			st := waitTask(t, ts, "the task to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
			if st.ExitCode != 0 || time.Since(start) < time.Second {
				t.Errorf("status %+v after %s; want exit 0 from the trap, not before 1s (the tee and the trap are set up by then, even on a loaded machine)", st, time.Since(start))
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "o.log")); !strings.Contains(string(b), "got-usr1\n") { // the group's sleep dies of it too
				t.Errorf("-o file %q", b)
			}
		})
	}
}
