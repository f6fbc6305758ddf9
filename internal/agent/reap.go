package agent

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The environment variables that tie a process to a job and a node.
const (
	jobIDVar   = "CORRAL_JOB_ID"
	attemptVar = "CORRAL_ATTEMPT"
	nodeIDVar  = "CORRAL_NODE_ID"
	serverVar  = "CORRAL_AGENT_SERVER" // the server of the agent that started it (standalone agents)
	// mpsGPUVar marks the MPS control daemon the agent starts for a
	// shared GPU (mps.go), and the MPS server it spawns: the agent's own
	// processes on the GPU, never foreign ones.
	mpsGPUVar = "CORRAL_MPS_GPU"
)

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
	if len(jobIDs) == 0 {
		return 0, nil
	}
	return killMatching(logger, func(env map[string]string) bool { return jobIDs[env[jobIDVar]] })
}

// KillOrphans kills the job processes (and their shims) that an earlier
// agent of this node, for this server, started and that this agent does
// not know: an agent restarted with another data directory cannot adopt
// them, and the server has already settled them as lost. keep says which
// job attempts this agent runs (adopted) and must be spared.
func KillOrphans(logger *slog.Logger, nodeID, server string, keep func(jobID, attempt string) bool) (int, error) {
	if nodeID == "" || server == "" {
		return 0, nil
	}
	return killMatching(logger, func(env map[string]string) bool {
		return env[jobIDVar] != "" && env[nodeIDVar] == nodeID && env[serverVar] == server && !keep(env[jobIDVar], env[attemptVar])
	})
}

// killMatching SIGKILLs the processes whose Corral environment matches, and
// their process groups, and returns how many it killed.
func killMatching(logger *slog.Logger, match func(env map[string]string) bool) (int, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	strays, err := findStrays(match)
	if err != nil {
		return 0, fmt.Errorf("kill stray job processes: %w", err)
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

// findStrays lists the live processes, other than this one, whose Corral
// environment matches.
func findStrays(match func(env map[string]string) bool) ([]stray, error) {
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
		env := corralEnviron(pid)
		if env == nil || !match(env) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue // gone already
		}
		out = append(out, stray{pid: pid, pgid: pgid, jobID: env[jobIDVar]})
	}
	return out, nil
}

// corralEnviron returns the CORRAL_* variables of the environment pid
// started with; nil when there are none or it cannot be read.
func corralEnviron(pid int) map[string]string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return nil
	}
	var env map[string]string
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if !bytes.HasPrefix(kv, []byte("CORRAL_")) {
			continue
		}
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			continue
		}
		if env == nil {
			env = map[string]string{}
		}
		env[string(k)] = string(v)
	}
	return env
}

// environJobID returns the CORRAL_JOB_ID in the environment pid started
// with, if any.
func environJobID(pid int) (string, bool) {
	id, ok := corralEnviron(pid)[jobIDVar]
	return id, ok
}

// procStat returns the fields of /proc/PID/stat that follow the command
// in parentheses ("pid (comm) S ppid ..."): the state first, then the
// parent; none where the line has no command.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, nil
	}
	return strings.Fields(string(b[i+1:])), nil
}
