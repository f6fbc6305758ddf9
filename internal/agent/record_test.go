package agent

import (
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A record is read from its complete lines: a line still being written
// (no newline yet) is not there, and one torn by a failed write is
// skipped without losing the lines around it.
func TestReadRecord(t *testing.T) {
	spec := api.TaskSpec{JobID: "j1", Attempt: 2, Command: "true", Env: map[string]string{"K": "v"}}
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		lines []record
		tail  string // raw bytes appended after the lines
		want  record
	}{
		{"spec only", nil, "", record{Spec: &spec, At: at, Notice: "/tmp/n/notice"}},
		{"running", []record{{ShimPID: 40}, {PID: 41}}, "", record{Spec: &spec, At: at, Notice: "/tmp/n/notice", ShimPID: 40, PID: 41}},
		{"exit being written", []record{{ShimPID: 40}, {PID: 41}}, `{"exit":{"exit_co`, record{Spec: &spec, At: at, Notice: "/tmp/n/notice", ShimPID: 40, PID: 41}},
		{"torn line then more", []record{{ShimPID: 40}}, `{"pid":4` + "\n" + `{"exit":{"exit_code":3,"finished_at":"2026-11-26T09:00:01Z"}}` + "\n",
			record{Spec: &spec, At: at, Notice: "/tmp/n/notice", ShimPID: 40, Exit: &exitStatus{ExitCode: 3, FinishedAt: at.Add(time.Second)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := recordPath(t.TempDir(), taskKey{"j1", 2, 0})
			if err := createRecord(path, record{Spec: &spec, Notice: "/tmp/n/notice", At: at}); err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.lines {
				if err := appendRecord(path, l); err != nil {
					t.Fatal(err)
				}
			}
			if tc.tail != "" {
				f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				f.WriteString(tc.tail)
				f.Close()
			}
			got, err := readRecord(path)
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			if string(gb) != string(wb) {
				t.Errorf("read %s\nwant %s", gb, wb)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("record mode %v, %v; want 0600 (it holds the job's env)", fi.Mode(), err)
			}
		})
	}
}

// An agent of this version adopts the job an earlier version's shim host
// still runs, from that version's state directory (spec.json, shim.pid,
// pid; exit.json once it ends), and reports its real exit code: an
// upgrade in place keeps running jobs.
func TestAdoptEarlierStateDirectory(t *testing.T) {
	dir := t.TempDir()
	ts := newHostedTasks(t, dir)
	// The earlier shim host: a process that lives until told to go.
	host := osexec.Command("sleep", "60")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer host.Process.Kill()
	spec := api.TaskSpec{JobID: "j1", Attempt: 1, Command: "sleep 60"}
	state := filepath.Join(ts.stateDir, "tasks", keyOf(spec).dirName())
	os.MkdirAll(state, 0o700)
	raw, _ := json.Marshal(spec)
	os.WriteFile(filepath.Join(state, "spec.json"), raw, 0o600)
	os.WriteFile(filepath.Join(state, "shim.pid"), []byte(strconv.Itoa(host.Process.Pid)), 0o600)
	os.WriteFile(filepath.Join(state, "pid"), []byte(strconv.Itoa(host.Process.Pid)), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := ts.adopt(ctx); n != 1 {
		t.Fatalf("adopted %d tasks; want 1", n)
	}
	if st := ts.statuses(); len(st) != 1 || st[0].State != api.TaskRunning || st[0].PID != host.Process.Pid {
		t.Fatalf("adopted %+v; want it running as pid %d", st, host.Process.Pid)
	}
	// The earlier host records the end its way.
	exit, _ := json.Marshal(exitStatus{ExitCode: 5, FinishedAt: time.Now().UTC()})
	os.WriteFile(filepath.Join(state, "exit.json.tmp"), exit, 0o600)
	os.Rename(filepath.Join(state, "exit.json.tmp"), filepath.Join(state, "exit.json"))
	st := waitTask(t, ts, "the adopted job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	if st.ExitCode != 5 || st.Error != "" {
		t.Errorf("adopted job ended %+v; want exit 5", st)
	}
	ts.forget(keyOf(spec))
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the forgotten task's state directory is still there: %v", err)
	}
}

// A restarted agent settles each record its predecessor left as the
// launch had got when that one died: a hosted record with no shim_pid,
// once the last shim host has read all its input (here: it is gone), was
// never taken (its job never runs) and is dropped, so the server requeues
// the attempt without a retry; without word of that host it may still be
// taken, and reads as lost; a recorded end, a failed start included, is
// reported with its real status; a standalone shim's record with no
// shim_pid may name a shim that was starting, and reads as lost, as
// before.
func TestAdoptAtEachInstantOfALaunch(t *testing.T) {
	spec := api.TaskSpec{JobID: "j1", Attempt: 1, Command: "true"}
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	ended := &exitStatus{ExitCode: 3, FinishedAt: at.Add(time.Second)}
	failed := &exitStatus{ExitCode: -1, Error: `workdir "/nope": not a directory one can enter`, FinishedAt: at}
	tests := []struct {
		name   string
		host   bool     // shim-host.pid names the last host, gone now
		first  record   // the agent's line
		lines  []record // what followed before the agent died
		want   bool     // the task is tracked (and reported)
		exit   int
		errSub string // in the reported error; "": none
	}{
		{"hosted, never taken", true, record{Hosted: true}, nil, false, 0, ""},
		{"hosted, no word of the last host", false, record{Hosted: true}, nil, true, -1, "lost"},
		{"hosted, taken by a host now gone", true, record{Hosted: true}, []record{{ShimPID: 1 << 22}}, true, -1, "lost"},
		{"hosted, ended", true, record{Hosted: true}, []record{{ShimPID: 1 << 22}, {PID: 1 << 22}, {Exit: ended}}, true, 3, ""},
		{"hosted, failed to start", true, record{Hosted: true}, []record{{Exit: failed}}, true, -1, "workdir"},
		{"standalone shim, maybe starting", false, record{}, nil, true, -1, "lost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newHostedTasks(t, t.TempDir())
			if tc.host {
				gone := osexec.Command("true")
				if err := gone.Run(); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(hostPIDPath(ts.stateDir), []byte(strconv.Itoa(gone.Process.Pid)), 0o600)
			}
			path := recordPath(ts.stateDir, keyOf(spec))
			first := tc.first
			first.Spec, first.At = &spec, at
			if err := createRecord(path, first); err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.lines {
				if err := appendRecord(path, l); err != nil {
					t.Fatal(err)
				}
			}
			ts.adopt(context.Background())
			st := ts.statuses()
			if !tc.want {
				if len(st) != 0 {
					t.Fatalf("tracked %+v; want the never-launched task dropped", st)
				}
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Errorf("its record is still there: %v", err)
				}
				return
			}
			if len(st) != 1 || st[0].State != api.TaskExited || st[0].ExitCode != tc.exit {
				t.Fatalf("adopted %+v; want exited with %d", st, tc.exit)
			}
			if got := st[0].Error; tc.errSub == "" && got != "" || tc.errSub != "" && !strings.Contains(got, tc.errSub) {
				t.Errorf("error %q; want %q in it", got, tc.errSub)
			}
		})
	}
}

// A task that cannot start has its failure in its record before it is
// reported: an agent that dies before the server has committed it
// reports it again, not as a task it knows nothing of.
func TestFailedStartIsRecorded(t *testing.T) {
	dir := t.TempDir()
	ts := newHostedTasks(t, dir)
	spec := api.TaskSpec{JobID: "j1", Attempt: 0, Command: "true", Workdir: filepath.Join(dir, "nope")}
	ts.start(spec)
	waitTask(t, ts, "the failed start", func(s api.TaskStatus) bool { return s.State == api.TaskExited })

	next := newHostedTasks(t, dir)
	next.adopt(context.Background())
	st := next.statuses()
	if len(st) != 1 || st[0].State != api.TaskExited || !strings.Contains(st[0].Error, "workdir") || strings.Contains(st[0].Error, "lost") {
		t.Fatalf("the restarted agent reports %+v; want the failed start with its error", st)
	}
}
