package contain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
)

// The node's task limit. --max-pids-per-job bounds one attempt; five
// attempts of one user together could still take a node's whole pid space
// (once 32,150 of 32,768 for 15 s), and then nothing else on the node
// can fork: not its agent, not sshd, not other users' jobs. So the node's
// parent cgroup (Parent) holds a pids.max of its own, the cap on all its
// jobs' tasks together (Spec.NodePids). The kernel charges every task to
// each of its cgroup's ancestors (v1 and v2 alike), so a fork in any
// attempt fails (EAGAIN) once the jobs together hold the node's cap, while
// processes outside the parent (the agent, the shims, the rest of the
// machine) keep what is left.

// DefaultNodePidsShare is the share of a machine's free task room that
// DefaultNodePids gives its jobs, in percent.
const DefaultNodePidsShare = 75

// minNodePids is the least DefaultNodePids gives: a machine already
// nearly full still runs a job or two.
const minNodePids = 1024

// DefaultNodePids is --max-pids-per-node's default on this machine: 75%
// (DefaultNodePidsShare) of the tasks it can still make when the agent
// starts, that is of the lower of kernel.pid_max and kernel.threads-max
// less the tasks alive then (/proc/loadavg), at least 1024. On a machine
// with pid_max 32,768 and a few hundred tasks that is some 24,300, which
// leaves some 8,000 to everything else. proc is the procfs mount
// ("/proc").
func DefaultNodePids(proc string) (int64, error) {
	pidMax, err := readInt(filepath.Join(proc, "sys/kernel/pid_max"))
	if err != nil {
		return 0, fmt.Errorf("node task limit: %w", err)
	}
	room := pidMax
	if threads, err := readInt(filepath.Join(proc, "sys/kernel/threads-max")); err == nil && threads > 0 {
		room = min(room, threads)
	}
	b, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return 0, fmt.Errorf("node task limit: %w", err)
	}
	// "0.20 0.18 0.12 1/80 11206": running/total tasks is the fourth.
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0, fmt.Errorf("node task limit: %s: %q: no task count", filepath.Join(proc, "loadavg"), b)
	}
	_, total, _ := strings.Cut(f[3], "/")
	inUse, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("node task limit: %s: %q: %w", filepath.Join(proc, "loadavg"), b, err)
	}
	return min(max((room-inUse)*DefaultNodePidsShare/100, minNodePids), MaxPids), nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// LimitPids sets the cap on the tasks of all the tree's attempts together
// (the parent's pids.max; 0: none, "max"), making the parent where it is
// missing. Attempts opened with Spec.NodePids set are made in the pids
// hierarchy under it (v1) even without a limit of their own, and one that
// finds the parent gone (removed while idle) gives the new parent the cap
// again.
func (t *Tree) LimitPids(n int64) error {
	if n < 0 || n > MaxPids {
		return fmt.Errorf("node task limit %d: want 0 (no limit) up to %d", n, MaxPids)
	}
	if t.paths == nil {
		return limitPidsV2(t.parent, n)
	}
	return limitPidsV1(t.parent, t.paths["pids"], n)
}

// pidsMax is the library's value for a cap of n (0: none).
func pidsMax(n int64) *int64 {
	if n == 0 {
		n = -1 // the library's "max"
	}
	return &n
}

// limitPidsV1 writes pids.max in the parent's directory of the pids
// hierarchy, dir ("" where the machine has none).
func limitPidsV1(parent, dir string, n int64) error {
	if dir == "" {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("cgroup %s: no pids hierarchy to hold the node's task limit", parent)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup %s: create: %w", parent, err)
	}
	if err := (&fs.PidsGroup{}).Set(dir, &cgroups.Resources{PidsLimit: pidsMax(n)}); err != nil {
		return fmt.Errorf("cgroup %s: task limit: %w", parent, err)
	}
	return nil
}

// limitPidsV2 makes the parent (enabling the controllers above it, pids
// among them) and writes its pids.max.
func limitPidsV2(parent string, n int64) error {
	r := &cgroups.Resources{PidsLimit: pidsMax(n), SkipDevices: true}
	cg, err := load(parent, r)
	if err != nil {
		return err
	}
	if err := cg.m.Apply(-1); err != nil {
		return fmt.Errorf("cgroup %s: create: %w", parent, err)
	}
	if n == 0 {
		if _, err := os.Stat(filepath.Join(cg.m.Path(""), "pids.max")); errors.Is(err, os.ErrNotExist) {
			return nil // no pids controller here: nothing to lift
		}
	}
	if err := cg.m.Set(r); err != nil {
		return fmt.Errorf("cgroup %s: task limit: %w", parent, err)
	}
	return nil
}
