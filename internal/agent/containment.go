package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// Containment: how the agent holds its jobs (see package contain). With
// cgroups, every task runs in <parent>/<job>.<attempt>.<rank>, its main
// process admitted before it runs any of the job's code; when the main
// process ends (normal exit, or the SIGKILL of a cancel, preemption or time
// limit) the whole cgroup is killed and removed. Without (process-group),
// the task's process group is killed, as before.

// limits are the agent's per-GPU defaults for jobs that name no limits,
// and its cap on every job's tasks.
type limits struct {
	memPerGPU  int64   // MiB; 0: no limit
	cpusPerGPU float64 // 0: no limit
	pids       int64   // processes and threads alive in one attempt's cgroup; 0: no limit
	nodePids   int64   // the same in all of them together (the parent's pids.max); 0: no limit
}

// setupContainment decides the node's containment: cgroups under its
// parent when they can be written, process groups otherwise (said once,
// with why).
func (a *Agent) setupContainment() {
	owner := a.cfg.Server
	if owner == "" {
		if abs, err := filepath.Abs(a.cfg.StateDir); err == nil {
			owner = abs
		}
	}
	parent := contain.Parent(a.cfg.NodeID, owner)
	a.readNodeDevices()
	mode, err := contain.ProcessGroup, fmt.Errorf("--containment %s", contain.ProcessGroup)
	var tree *contain.Tree
	if a.cfg.Containment != contain.ProcessGroup {
		// The parent's device allow-list first: v1 refuses it once a
		// cgroup (the probe's) has been made under the parent.
		var terr, prepErr error
		if tree, terr = contain.NewTree(parent, a.tasks.devices); terr == nil {
			prepErr = tree.Prepare()
		}
		mode, err = contain.Probe(parent)
		switch {
		case mode == contain.ProcessGroup:
		case terr != nil:
			mode, err = contain.ProcessGroup, terr
		case prepErr != nil:
			a.log.Warn("the node's cgroup parent keeps its device rules; each job's are written in full (slower starts)",
				"parent", parent, "err", prepErr)
		}
	}
	a.tasks.mode = mode
	if mode == contain.ProcessGroup {
		a.log.Warn("jobs are contained by process groups only: a job's escaped processes and other GPUs are not fenced off",
			"containment", mode, "why", err)
		return
	}
	a.tasks.cgroupParent, a.tasks.cgroupTree = parent, tree
	a.log.Info("jobs run in cgroups", "containment", mode, "parent", parent)
	// The node's cap on its jobs' tasks together (0 lifts one an earlier
	// agent set).
	if tree == nil {
		return
	}
	if err := tree.LimitPids(a.tasks.limits.nodePids); err != nil {
		a.log.Warn("the node's jobs are not held to --max-pids-per-node together; each still is to --max-pids-per-job",
			"max_pids_per_node", a.tasks.limits.nodePids, "err", err)
	} else if a.tasks.limits.nodePids > 0 {
		a.log.Info("the node's jobs together may have at most this many processes and threads", "max_pids_per_node", a.tasks.limits.nodePids)
	}
}

// sweepCgroups kills and removes the cgroups of this node's attempts that
// this agent does not track (a previous agent's, left by a crash), and
// says how many.
func (a *Agent) sweepCgroups() {
	if a.tasks.cgroupParent == "" {
		return
	}
	removed, err := contain.Sweep(a.tasks.cgroupParent, func(name string) bool {
		job, attempt, ok := contain.ParseName(name)
		return ok && a.tasks.has(job, attempt)
	})
	if err != nil {
		a.log.Warn("could not remove every leftover job cgroup", "err", err)
	}
	if len(removed) > 0 {
		a.log.Warn("killed the leftover cgroups of jobs no agent tracks", "cgroups", removed)
	}
}

// releaseCgroups removes the node's cgroup parent when no task of this
// agent runs (a stopped `corral up`, or an idle agent that ends), so that
// none is left behind; a parent with running jobs stays.
func (a *Agent) releaseCgroups() {
	if a.tasks.cgroupParent == "" {
		return
	}
	for _, st := range a.tasks.statuses() {
		if st.State == api.TaskRunning {
			return
		}
	}
	if err := contain.RemoveIfEmpty(a.tasks.cgroupParent); err != nil {
		a.log.Debug("the node's cgroup parent stays", "err", err)
	}
}

// inJobCgroup reports whether pid runs in one of this node's job cgroups
// (a job's process that scrubbed its environment is still the job's).
func (t *tasks) inJobCgroup(pid int) bool {
	if t.cgroupParent == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	return err == nil && strings.Contains(string(b), "/"+t.cgroupParent+"/")
}

// cgroupPath is the task's cgroup, "" under process groups.
func (t *tasks) cgroupPath(s api.TaskSpec) string {
	if t.cgroupParent == "" {
		return ""
	}
	return filepath.Join(t.cgroupParent, contain.NameOf(s.JobID, s.Attempt, s.Rank))
}

// removeCgroup kills and removes a task's cgroup (one whose shim died
// without doing it).
func (t *tasks) removeCgroup(s api.TaskSpec) {
	path := t.cgroupPath(s)
	if path == "" {
		return
	}
	if err := contain.Remove(path); err != nil {
		t.log.Warn("could not remove the task's cgroup", "job_id", s.JobID, "err", err)
	}
}

// jobCgroup is a task's cgroup while its main process starts and runs. A
// nil *jobCgroup (process groups) does nothing.
type jobCgroup struct {
	cg   *contain.Cgroup
	r, w *os.File // the gate: the child waits on r until w is written
}

// openCgroup makes the task's cgroup under the node's resolved parent; nil
// (and no error) under process groups.
func (t *tasks) openCgroup(s api.TaskSpec) (*jobCgroup, error) {
	if t.cgroupParent == "" {
		return nil, nil
	}
	if t.cgroupTree == nil {
		return openJobCgroup(t.cgroupPath(s), t.containSpec(s))
	}
	cg, err := t.cgroupTree.Open(contain.NameOf(s.JobID, s.Attempt, s.Rank), t.containSpec(s))
	if err != nil {
		return nil, err
	}
	return gated(cg)
}

// openJobCgroup makes the task's cgroup; nil (and no error) for path "".
func openJobCgroup(path string, spec contain.Spec) (*jobCgroup, error) {
	if path == "" {
		return nil, nil
	}
	cg, err := contain.Open(path, spec)
	if err != nil {
		return nil, err
	}
	return gated(cg)
}

// gated is cg with the pipe of its gate.
func gated(cg *contain.Cgroup) (*jobCgroup, error) {
	r, w, err := os.Pipe()
	if err != nil {
		cg.Destroy()
		return nil, fmt.Errorf("cgroup gate: %w", err)
	}
	return &jobCgroup{cg: cg, r: r, w: w}, nil
}

// wrap makes cmd wait at the gate (fd 3) before it runs its argv.
func (j *jobCgroup) wrap(cmd *osexec.Cmd) {
	if j == nil {
		return
	}
	argv := contain.Gate(cmd.Args)
	cmd.Path, cmd.Args = argv[0], argv
	cmd.ExtraFiles = append(cmd.ExtraFiles, j.r)
}

// admit puts the started child in the cgroup and opens the gate. On error
// the child has been killed (it ran none of the job's code).
func (j *jobCgroup) admit(pid int) error {
	if j == nil {
		return nil
	}
	j.r.Close()
	if err := j.cg.Add(pid); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		j.w.Close()
		return err
	}
	return contain.Release(j.w)
}

// abort undoes openJobCgroup when the child did not start.
func (j *jobCgroup) abort() {
	if j == nil {
		return
	}
	j.r.Close()
	j.w.Close()
	j.cg.Destroy()
}

// end kills everything left in the cgroup, once the main process has
// ended, and reports whether the OOM killer acted in it. When it returns,
// no process of the job is left (its GPUs are free); remove then removes
// the empty cgroup, which need not hold up reporting the end.
func (j *jobCgroup) end(log *slog.Logger) (oomKilled bool) {
	if j == nil {
		return false
	}
	oomKilled = j.cg.OOMKills() > 0
	if err := j.cg.Kill(); err != nil {
		log.Warn("job cgroup not emptied", "cgroup", j.cg.Path(), "err", err)
	}
	return oomKilled
}

// remove removes the cgroup (after end), killing anything left in it.
func (j *jobCgroup) remove(log *slog.Logger) {
	if j == nil {
		return
	}
	if err := j.cg.Destroy(); err != nil {
		log.Warn("job cgroup not fully removed", "cgroup", j.cg.Path(), "err", err)
	}
}

// shimContainArgs are the shim's flags for the task's cgroup.
func (t *tasks) shimContainArgs(s api.TaskSpec) []string {
	path := t.cgroupPath(s)
	if path == "" {
		return nil
	}
	raw, _ := json.Marshal(t.containSpec(s))
	return []string{"--cgroup", path, "--cgroup-spec", string(raw)}
}

// openShimCgroup is openJobCgroup from the shim's --cgroup and
// --cgroup-spec; nil without --cgroup.
func openShimCgroup(path, rawSpec string) (*jobCgroup, error) {
	if path == "" {
		return nil, nil
	}
	var spec contain.Spec
	if rawSpec != "" {
		if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
			return nil, fmt.Errorf("--cgroup-spec: %w", err)
		}
	}
	return openJobCgroup(path, spec)
}

// shimTrees are a shim host's cgroup trees, one per parent, each prepared
// once. Its jobs' cgroups then take Tree.Open's fast path (a fresh cgroup
// under a prepared parent: two writes for its GPUs) instead of resolving
// the hierarchies and writing and checking the whole device list for
// each job, which was a fifth of the host's CPU at 100 starts a second.
type shimTrees struct {
	mu    sync.Mutex
	trees map[string]*contain.Tree
}

// release removes the trees' parents where nothing is left in them: the
// host's last job has ended and its agent is gone (a `corral up` stopped
// while jobs ran leaves the parent to its host), so nothing is left
// behind. A parent with a cgroup under it stays (an agent started since
// runs jobs there); one that agent prepared but has not used yet is made
// again by its first job (Tree.Open).
func (c *shimTrees) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir := range c.trees {
		contain.RemoveUnused(dir)
	}
}

// open is openShimCgroup through the trees; a nil *shimTrees (a shim of
// one job) opens it on its own.
func (c *shimTrees) open(path, rawSpec string) (*jobCgroup, error) {
	if c == nil || path == "" {
		return openShimCgroup(path, rawSpec)
	}
	var spec contain.Spec
	if rawSpec != "" {
		if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
			return nil, fmt.Errorf("--cgroup-spec: %w", err)
		}
	}
	dir := filepath.Dir(path)
	c.mu.Lock()
	t := c.trees[dir]
	if t == nil {
		nt, err := contain.NewTree(dir, spec.Devices)
		if err != nil {
			c.mu.Unlock()
			return openJobCgroup(path, spec)
		}
		// The agent prepared the parent already: this writes nothing and
		// marks the tree prepared. Should it fail, the tree still holds
		// each job to its own rules, written in full.
		nt.Prepare()
		if c.trees == nil {
			c.trees = map[string]*contain.Tree{}
		}
		c.trees[dir], t = nt, nt
	}
	c.mu.Unlock()
	cg, err := t.Open(filepath.Base(path), spec)
	if err != nil {
		return nil, err
	}
	return gated(cg)
}
