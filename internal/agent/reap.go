package agent

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

const jobIDVar = "CORRAL_JOB_ID="

// stray is a process found running for a job.
type stray struct {
	pid, pgid int
	jobID     string
}

// KillStrays finds the processes whose environment has CORRAL_JOB_ID set to
// one of jobIDs, by reading /proc/*/environ, and SIGKILLs them and their
// process groups. It returns how many such processes it killed. A server
// that restarts after a crash calls it before requeuing jobs, so that the
// processes of jobs it lost track of do not keep their GPUs busy.
// Processes it cannot inspect are skipped; it never kills its own process
// or process group.
func KillStrays(logger *slog.Logger, jobIDs map[string]bool) (int, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(jobIDs) == 0 {
		return 0, nil
	}
	strays, err := findStrays(jobIDs)
	if err != nil {
		return 0, fmt.Errorf("kill stray jobs: %w", err)
	}

	// All are found before any is killed: a killed process's environ reads
	// empty, and it would go uncounted.
	selfGroup := syscall.Getpgrp()
	groupKilled := make(map[int]bool)
	for _, s := range strays {
		if s.pgid <= 1 || s.pgid == selfGroup || groupKilled[s.pgid] {
			continue
		}
		err := syscall.Kill(-s.pgid, syscall.SIGKILL)
		groupKilled[s.pgid] = err == nil
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			logger.Warn("kill stray job process group", "job_id", s.jobID, "pgid", s.pgid, "err", err)
		}
	}
	killed := 0
	for _, s := range strays {
		err := syscall.Kill(s.pid, syscall.SIGKILL)
		switch {
		case err == nil, errors.Is(err, syscall.ESRCH) && groupKilled[s.pgid]:
			killed++
			logger.Warn("killed stray job process", "job_id", s.jobID, "pid", s.pid, "pgid", s.pgid)
		case !errors.Is(err, syscall.ESRCH):
			logger.Warn("kill stray job process", "job_id", s.jobID, "pid", s.pid, "err", err)
		}
	}
	return killed, nil
}

// findStrays lists the live processes, other than this one, whose
// CORRAL_JOB_ID is in jobIDs.
func findStrays(jobIDs map[string]bool) ([]stray, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []stray
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		jobID, ok := environJobID(pid)
		if !ok || !jobIDs[jobID] {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue // gone already
		}
		out = append(out, stray{pid: pid, pgid: pgid, jobID: jobID})
	}
	return out, nil
}

// environJobID returns the CORRAL_JOB_ID in the environment pid started
// with, if any.
func environJobID(pid int) (string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return "", false
	}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(jobIDVar)); ok {
			return string(v), true
		}
	}
	return "", false
}
