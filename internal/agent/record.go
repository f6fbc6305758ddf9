package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sched/corral/internal/api"
)

// A task's state is one file, its record: DIR/tasks/JOB.ATTEMPT.RANK.task,
// private (0600: the spec holds the job's env). It is a log of JSON lines,
// each appended whole by one write(2) on a file opened O_APPEND:
//
//	{"spec": {...}, "notice": PATH, "at": T}   the agent, before the launch ("hosted": true: for a shim host)
//	{"shim_pid": N}                             the agent, once its shim runs it; a shim host, when it takes the job
//	{"pid": N}                                  the shim, once the job runs (= its process group)
//	{"exit": {...}}                             the shim, once the job has ended (exitStatus); fsynced
//
// The exit line is on disk (fsync) before the end is told to anyone, so
// an end that was told is never lost with a crash. A hosted record
// without a shim_pid line, once the last shim host has read all its input
// (hostDrained), was never taken: a restarted agent drops it, and the
// server requeues the attempt, which never started, without counting a
// retry. A task that could not start gets an exit line with the error, so
// its end survives a restart too.
//
// A reader merges the complete lines; a torn last line (its writer died
// in the write, or is in it) is not yet written, and a line that does not
// parse (one torn by a failed write, with another appended after it) is
// skipped. One file instead of a directory of
// four (spec.json, shim.pid, pid, exit.json, each written through a
// temporary file and a rename) makes a start create one inode instead of
// five, and its end remove one: on file systems where allocating an inode
// is dear (ext4 without a journal scans past recently deleted ones) that
// was most of a start's cost.
//
// Earlier versions kept a directory per task with those four files; a
// restarted agent still reads one (readRecord), because an upgraded
// `corral up` adopts the jobs its predecessor's shim host runs on, and
// that host goes on writing the old way until its last job ends.
type record struct {
	Spec    *api.TaskSpec `json:"spec,omitempty"`
	Notice  string        `json:"notice,omitempty"` // the task's own preemption notice (notice.go)
	At      time.Time     `json:"at,omitzero"`      // when the agent started it
	Hosted  bool          `json:"hosted,omitempty"` // for a shim host, which writes the shim_pid line when it takes the job
	ShimPID int           `json:"shim_pid,omitempty"`
	PID     int           `json:"pid,omitempty"`
	Exit    *exitStatus   `json:"exit,omitempty"`
}

// recordExt is the extension of a task's record file.
const recordExt = ".task"

// recordPath is the record file of task k under the agent's state dir.
func recordPath(stateDir string, k taskKey) string {
	return filepath.Join(stateDir, "tasks", k.dirName()+recordExt)
}

// createRecord writes a task's first line, replacing any record the path
// held, and reserves the disk room of the lines that follow it (below).
// The tasks directory is made if need be.
func createRecord(path string, r record) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		reserveRecord(f, int64(len(line)+1))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// recordReserve is the disk room a record keeps past its first line for
// the lines that follow (shim_pid, pid, exit: a few hundred bytes).
const recordReserve = 8 << 10

// reserveRecord allocates recordReserve bytes of disk past the record's
// end without changing its size (fallocate FALLOC_FL_KEEP_SIZE), so that
// its later lines, its exit above all, are written even once the data
// dir's disk is full: a job that ends then is settled with its real exit
// status, not lost for want of a page. Best effort: a file system without
// fallocate has the shim retry the exit line until there is room
// (writeExit).
func reserveRecord(f *os.File, size int64) {
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, size, recordReserve)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// appendRecord appends one line to a task's record.
func appendRecord(path string, r record) error {
	return writeRecord(path, r, 0)
}

// appendRecordSync appends one line to a task's record and returns once
// it is on disk (fsync): for the exit, which must outlive a crash once
// anyone has been told of it.
func appendRecordSync(path string, r record) error {
	return writeRecord(path, r, os.O_SYNC)
}

// writeExit appends the job's exit status to its record, and returns
// once it is on disk: the end is told only after.
func writeExit(path string, st exitStatus) error {
	return appendRecordSync(path, record{Exit: &st})
}

func writeRecord(path string, r record, flags int) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeRecordLine(path, append(line, '\n'), flags)
}

// writeRecordLine appends line (newline included) to a record by one
// write.
func writeRecordLine(path string, line []byte, flags int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|flags, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(line) // one write: readers see all of the line or none
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readRecord reads a task's state: a record file, or an earlier version's
// state directory. A part not written yet is zero.
func readRecord(path string) (record, error) {
	var r record
	fi, err := os.Stat(path)
	if err != nil {
		return r, err
	}
	if fi.IsDir() {
		return readStateDir(path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	for len(b) > 0 {
		line, rest, whole := bytes.Cut(b, []byte{'\n'})
		if !whole {
			break // torn: its writer died in the write, or writes now
		}
		b = rest
		var l record
		if json.Unmarshal(line, &l) != nil {
			continue // a line torn by a failed write, then another appended after it
		}
		r.merge(l)
	}
	return r, nil
}

// merge takes what l sets.
func (r *record) merge(l record) {
	if l.Spec != nil {
		r.Spec, r.Notice, r.At, r.Hosted = l.Spec, l.Notice, l.At, l.Hosted
	}
	if l.ShimPID != 0 {
		r.ShimPID = l.ShimPID
	}
	if l.PID != 0 {
		r.PID = l.PID
	}
	if l.Exit != nil {
		r.Exit = l.Exit
	}
}

// readStateDir reads an earlier version's state directory: spec.json
// (its time is the task's start), notice, shim.pid, pid and exit.json,
// each whole or absent.
func readStateDir(dir string) (record, error) {
	var r record
	f, err := os.Open(filepath.Join(dir, "spec.json"))
	if err != nil {
		return r, err
	}
	defer f.Close()
	var spec api.TaskSpec
	if err := json.NewDecoder(f).Decode(&spec); err != nil {
		return r, fmt.Errorf("task state %s: %w", dir, err)
	}
	r.Spec = &spec
	if fi, err := f.Stat(); err == nil {
		r.At = fi.ModTime().UTC() // when the agent started it
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notice")); err == nil {
		r.Notice = string(b)
	}
	r.ShimPID = readInt(filepath.Join(dir, "shim.pid"))
	r.PID = readInt(filepath.Join(dir, "pid"))
	if b, err := os.ReadFile(filepath.Join(dir, "exit.json")); err == nil {
		var st exitStatus
		if json.Unmarshal(b, &st) == nil {
			r.Exit = &st
		}
	}
	return r, nil
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// readExit reads a task's exit status; false when there is none yet.
func readExit(path string) (exitStatus, bool) {
	r, err := readRecord(path)
	if err != nil || r.Exit == nil {
		return exitStatus{}, false
	}
	return *r.Exit, true
}

// readPID reads the job pid a task's shim recorded; 0 when there is none.
func readPID(path string) int {
	r, _ := readRecord(path)
	return r.PID
}
