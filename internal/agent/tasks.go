package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/agent/contain"
	"github.com/corral-sched/corral/internal/api"
)

// adoptPoll is how often an adopted task (whose shim is not our child) is
// checked for its end.
const adoptPoll = 250 * time.Millisecond

// tasks runs a node's tasks through shims and keeps their state on disk
// (StateDir/tasks/JOB.ATTEMPT.RANK/) so that a restarted agent can adopt
// them. Safe for concurrent use.
type tasks struct {
	stateDir, logDir string
	nodeID, server   string
	detach           bool     // jobs outlive the agent (standalone agent, corral up)
	unfenced         bool     // with detach: no fence, and one shim host runs the jobs (corral up)
	runAs            string   // whose account jobs run under (runas.go)
	runAsFallback    string   // the account of owners without one (runas.go)
	maxLogSize       int64    // bytes of output an attempt's log keeps (logcap.go); 0: no cap
	shim             []string // command that runs the shim
	tee              []string // command that runs `corral shim --tee` (jobio.go); empty: shim + --tee
	log              *slog.Logger
	changed          func() // called when a task starts or ends
	// Containment (containment.go), set before the first task starts.
	mode         string                  // contain.CgroupV1, CgroupV2 or ProcessGroup
	cgroupParent string                  // "": process groups
	cgroupTree   *contain.Tree           // cgroupParent resolved once; nil: resolved per start
	limits       limits                  // per-GPU defaults
	minors       map[int]int             // GPU index -> device minor (195:N); absent: the index
	migs         map[int][]api.MIGDevice // GPU index -> its MIG devices, while MIG is on
	devices      contain.NodeDevices     // the node's run-time device majors and its admin's extra devices (devices.go)
	migCaps      contain.MIGCaps         // the driver's MIG capability minors (devices.go)
	uuids        map[int]string          // GPU index -> its UUID
	mps          *mps                    // the shared GPUs' MPS daemons (mps.go); nil: no GPU is shared

	mu    sync.Mutex
	byKey map[taskKey]*task
	fence time.Duration // with detach: shims kill their jobs after this long without the agent (0: never)

	shells *shellSet // shells open into tasks, ended with them (shell.go)
	jobEnv           // what jobs' environments take from the agent, and their scratch (jobenv.go)
	images *images   // the node's container runtime (container.go); nil: none
	host   shimHost  // with unfenced: the shim host that runs the jobs (shimhost.go)
}

type taskKey struct {
	job           string
	attempt, rank int
}

// task is one rank of one attempt on this node.
type task struct {
	spec      api.TaskSpec
	state     string // its record (record.go), or an earlier version's state directory; "": none (launchDirect)
	startedAt time.Time
	exited    *api.TaskStatus
	noticed   bool
	stopping  bool
	kill      *time.Timer
	shipped   int64 // log bytes shipped to the server
	pid       int   // the job's pid when it runs without a shim (launchDirect)
	shimPID   int   // the job's pid its shim recorded, once read (it does not change)
	recSize   int64 // the record's size when jobPID last read it without finding the pid

	notice string // its preemption notice's own path (notice.go); "": beside its log

	// A task with an image (container_task.go): preparing while its image is
	// fetched (cancelPrep ends that), then run as image says.
	preparing  bool
	cancelPrep context.CancelFunc
	image      *prepared
}

// jobPID is the task's job pid (= its process group), 0 while unknown.
// Lock held.
func (tk *task) jobPID() int {
	if tk.pid > 0 {
		return tk.pid
	}
	if tk.shimPID == 0 && tk.state != "" { // read once: every report asks
		// Until the shim has written the pid, read the record again only
		// once it has grown: a sync may come many times a millisecond, and
		// stat costs a twentieth of reading and parsing the record.
		fi, err := os.Stat(tk.state)
		if err != nil || fi.Size() == tk.recSize && !fi.IsDir() {
			return 0
		}
		tk.recSize = fi.Size()
		tk.shimPID = readPID(tk.state)
	}
	return tk.shimPID
}

func keyOf(s api.TaskSpec) taskKey { return taskKey{s.JobID, s.Attempt, s.Rank} }

func (k taskKey) dirName() string { return fmt.Sprintf("%s.%d.%d", k.job, k.attempt, k.rank) }

// alivePath is the agent's liveness file, which fenced shims watch.
func (t *tasks) alivePath() string { return filepath.Join(t.stateDir, "alive") }

// paths of a task's log and notice files.
func (t *tasks) logPath(k taskKey) string    { return t.attemptFile(k, ".log") }
func (t *tasks) noticePath(k taskKey) string { return t.attemptFile(k, ".preempt") }

func (t *tasks) attemptFile(k taskKey, ext string) string {
	name := strconv.Itoa(k.attempt)
	if k.rank > 0 {
		name += ".rank" + strconv.Itoa(k.rank)
	}
	return filepath.Join(t.logDir, k.job, name+ext)
}

// start launches a task's shim. A task that cannot start is recorded as
// exited with the reason.
func (t *tasks) start(spec api.TaskSpec) { t.startWith(spec, t.credential) }

// credentialFunc is whose account an owner's job runs under
// (jobCredential on this node's accounts).
type credentialFunc func(owner string) (*credential, error)

// credential looks the owner's account up on this node.
func (t *tasks) credential(owner string) (*credential, error) {
	c, err := jobCredential(owner, os.Geteuid(), t.runAs, t.runAsFallback, systemLookup, systemGroups)
	if c != nil {
		c.shell = loginShell(c.name) // the job's SHELL (jobenv.go)
	}
	return c, err
}

// credentials returns t.credential, looking each owner up once: for the
// tasks started together (one reconcile), whose owners are often one.
func (t *tasks) credentials() credentialFunc {
	type result struct {
		c   *credential
		err error
	}
	seen := map[string]result{}
	return func(owner string) (*credential, error) {
		r, ok := seen[owner]
		if !ok {
			r.c, r.err = t.credential(owner)
			seen[owner] = r
		}
		return r.c, r.err
	}
}

// startWith starts the task, its owner's account found with cred.
func (t *tasks) startWith(spec api.TaskSpec, cred credentialFunc) {
	k := keyOf(spec)
	tk := &task{spec: spec, state: recordPath(t.stateDir, k), startedAt: time.Now().UTC()}
	t.mu.Lock()
	if _, dup := t.byKey[k]; dup {
		t.mu.Unlock()
		return
	}
	t.byKey[k] = tk
	t.mu.Unlock()

	if spec.Image != "" {
		t.startImage(tk, cred) // fetch the image first (container_task.go)
		return
	}
	if err := t.launch(tk, cred); err != nil {
		t.log.Warn("task did not start", "job_id", spec.JobID, "rank", spec.Rank, "err", err)
		now := time.Now().UTC()
		t.recordFailedStart(tk, err, now)
		t.finish(tk, api.TaskStatus{ExitCode: -1, Error: err.Error(), FinishedAt: &now})
		return
	}
	t.armSignal(tk) // jobio.go: --signal
}

// recordFailedStart writes why a task could not start in its record
// (made if the launch failed before it was), before anyone is told: an
// agent restarted before the server has committed the failure reports it
// again, rather than a task it knows nothing of (which the server would
// take for one that never reached the node).
func (t *tasks) recordFailedStart(tk *task, cause error, at time.Time) {
	if !t.detach {
		return // no record: the agent's jobs die with it
	}
	if _, err := os.Stat(tk.state); err != nil {
		spec := tk.spec
		if err := createRecord(tk.state, record{Spec: &spec, At: tk.startedAt}); err != nil {
			t.log.Warn("the failed start is not recorded", "job_id", spec.JobID, "err", err)
			return
		}
	}
	if err := writeExit(tk.state, exitStatus{ExitCode: -1, Error: cause.Error(), FinishedAt: at}); err != nil {
		t.log.Warn("the failed start is not recorded", "job_id", tk.spec.JobID, "err", err)
	}
}

func (t *tasks) launch(tk *task, credFor credentialFunc) error {
	spec, k := tk.spec, keyOf(tk.spec)
	if spec.Workdir != "" {
		if fi, err := os.Stat(spec.Workdir); err != nil || !fi.IsDir() {
			return fmt.Errorf("workdir %q: not a directory one can enter", spec.Workdir)
		}
	}
	cred, err := credFor(spec.User)
	if err != nil {
		return err
	}
	if err := t.prepareNotice(tk, cred); err != nil {
		return err
	}
	if err := t.makeScratch(k, cred); err != nil { // jobenv.go
		return err
	}
	if err := t.prepareShare(context.Background(), spec, cred); err != nil { // mps.go
		return err
	}
	if tk.image == nil { // an image's task had its own (prepareImage)
		if err := t.prepareJobIO(tk, cred); err != nil { // jobio.go: script, -o/-e
			return err
		}
	}
	spec = tk.spec
	if !t.detach {
		return t.launchDirect(tk, cred)
	}
	t.mu.Lock()
	notice := tk.notice
	t.mu.Unlock()
	if err := createRecord(tk.state, record{Spec: &spec, Notice: notice, At: tk.startedAt, Hosted: t.unfenced}); err != nil { // record.go
		return fmt.Errorf("task state: %w", err)
	}
	if t.unfenced {
		return t.launchHosted(tk, cred) // one shim host for all jobs (shimhost.go)
	}
	args := append(slices.Clone(t.shim[1:]), "--state", tk.state, "--log", t.logPath(k), "--workdir", spec.Workdir,
		"--max-log-size", strconv.FormatInt(t.maxLogSize, 10))
	t.mu.Lock()
	fence := t.fence
	t.mu.Unlock()
	if t.detach && fence > 0 && !t.unfenced {
		args = append(args, "--alive", t.alivePath(), "--fence", fence.String())
	}
	argv, env, runAs := t.jobProcess(tk, cred, t.jobArgv(spec.Command), t.env(spec, cred)) // container_task.go
	args = append(args, runAs.shimArgs()...)
	args = append(args, t.shimContainArgs(spec)...)
	args = append(append(args, "--env-stdin", "--"), argv...)
	cmd := osexec.Command(t.shim[0], args...)
	// The job's environment reaches the shim on its stdin, not as its
	// own: the shim runs as the agent's account (root), and a job's
	// LD_PRELOAD or LD_LIBRARY_PATH must not load code into it.
	cmd.Env = shimEnv()
	cmd.Stdin = strings.NewReader(strings.Join(env, "\x00"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start shim: %w", err)
	}
	appendRecord(tk.state, record{ShimPID: cmd.Process.Pid})
	t.log.Info("task started", "job_id", spec.JobID, "attempt", spec.Attempt, "rank", spec.Rank, "gpus", spec.GPUs)
	t.changed()
	go func() {
		cmd.Wait()
		t.reap(tk)
	}()
	return nil
}

// launchDirect runs a job as a child of the agent itself, without a shim,
// for an agent whose jobs must not outlive it (Config.Detach false: they
// get SIGKILL if it dies; a graceful stop stops them first). `corral up`
// ran its jobs so until they had to survive its restarts (it now uses a
// shim host, shimhost.go); BenchmarkTaskStart keeps it as a baseline. The job runs in its own
// process group; when it ends, whatever it left in the group is killed.
func (t *tasks) launchDirect(tk *task, cred *credential) error {
	spec, k := tk.spec, keyOf(tk.spec)
	logFile, err := openLog(t.logPath(k))
	if err != nil {
		return fmt.Errorf("job log: %w", err)
	}
	out, err := startLogPipe(logFile, t.maxLogSize) // the job's output, capped (logcap.go)
	if err != nil {
		return err
	}
	jcg, err := t.openCgroup(spec)
	if err != nil {
		out.printf("corral: %v\n", err)
		out.finish()
		return fmt.Errorf("containment: %w", err)
	}
	argv, env, cred := t.jobProcess(tk, cred, t.jobArgv(spec.Command), t.env(spec, cred)) // container_task.go
	cmd := osexec.Command(argv[0], argv[1:]...)
	jcg.wrap(cmd) // gated: runs nothing of the job's before it is in its cgroup
	cmd.Dir = spec.Workdir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out.w, out.w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cred != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: cred.uid, Gid: cred.gid, Groups: cred.groups}
	}
	if err := cmd.Start(); err != nil {
		jcg.abort()
		out.printf("corral: %v\n", err)
		out.finish()
		return fmt.Errorf("start: %w", err)
	}
	pid := cmd.Process.Pid
	if err := jcg.admit(pid); err != nil {
		cmd.Wait()
		jcg.abort()
		out.printf("corral: %v\n", err)
		out.finish()
		return fmt.Errorf("containment: %w", err)
	}
	out.started() // the job has its own copy
	t.mu.Lock()
	tk.pid = pid
	t.mu.Unlock()
	t.log.Info("task started", "job_id", spec.JobID, "attempt", spec.Attempt, "rank", spec.Rank, "gpus", spec.GPUs, "pid", pid)
	t.changed()
	go func() {
		cmd.Wait()
		syscall.Kill(-pid, syscall.SIGKILL) // whatever the job left in its group
		oom := jcg.end(t.log)               // and in its cgroup
		t.logCapped(spec, out)              // the log is whole before the end is told (logcap.go)
		now := time.Now().UTC()
		st := api.TaskStatus{ExitCode: cmd.ProcessState.ExitCode(), FinishedAt: &now, OOMKilled: oom}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.ExitCode, st.Signal = 128+int(ws.Signal()), ws.Signal().String()
		}
		t.finish(tk, st)
		jcg.remove(t.log) // off the start path: its processes are dead (end)
	}()
	return nil
}

// skip records a task that was stopped before it ever started here, as if
// SIGTERM had ended it.
func (t *tasks) skip(spec api.TaskSpec) {
	tk := &task{spec: spec, startedAt: time.Now().UTC()}
	t.mu.Lock()
	if _, dup := t.byKey[keyOf(spec)]; dup {
		t.mu.Unlock()
		return
	}
	t.byKey[keyOf(spec)] = tk
	t.mu.Unlock()
	now := time.Now().UTC()
	t.finish(tk, api.TaskStatus{ExitCode: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM.String(), FinishedAt: &now})
}

// reap records a task's end from its shim's exit file.
func (t *tasks) reap(tk *task) {
	st, ok := readExit(tk.state)
	now := time.Now().UTC()
	status := api.TaskStatus{ExitCode: -1, FinishedAt: &now, Error: "lost: the shim ended without an exit status"}
	if ok {
		status = api.TaskStatus{ExitCode: st.ExitCode, Signal: st.Signal, Error: st.Error, FinishedAt: &st.FinishedAt, OOMKilled: st.OOMKilled}
		if st.Lost != "" {
			status.Error = "lost: " + st.Lost
		}
	} else {
		t.removeCgroup(tk.spec) // the shim died before it could
	}
	t.finish(tk, status)
}

func (t *tasks) finish(tk *task, st api.TaskStatus) {
	// The scratch goes before the end is told: whoever sees the attempt
	// ended finds nothing of it left.
	t.removeScratch(keyOf(tk.spec)) // jobenv.go
	t.mu.Lock()
	if tk.exited != nil {
		t.mu.Unlock()
		return
	}
	st.JobID, st.Attempt, st.Rank, st.State = tk.spec.JobID, tk.spec.Attempt, tk.spec.Rank, api.TaskExited
	if st.Error == "" {
		started := tk.startedAt
		st.StartedAt = &started
		st.ImageDigest = tk.imageDigest()
	}
	tk.exited = &st
	if tk.kill != nil {
		tk.kill.Stop()
	}
	t.mu.Unlock()
	t.log.Info("task ended", "job_id", st.JobID, "rank", st.Rank, "exit_code", st.ExitCode, "signal", st.Signal, "err", st.Error)
	t.endImage(tk)               // what podman left of its container (container_task.go)
	t.shells.end(keyOf(tk.spec)) // shell.go
	t.changed()
}

// stop warns a task (notice) and stops it: SIGTERM to its process group,
// SIGKILL after grace. Repeated calls keep the first timer.
func (t *tasks) stop(k taskKey, grace time.Duration, notice string) {
	t.mu.Lock()
	tk := t.byKey[k]
	if tk == nil || tk.exited != nil {
		t.mu.Unlock()
		return
	}
	writeNotice := notice != "" && !tk.noticed
	tk.noticed = tk.noticed || notice != ""
	first := !tk.stopping && grace >= 0
	tk.stopping = tk.stopping || grace >= 0
	if tk.stopping && tk.cancelPrep != nil {
		tk.cancelPrep() // its image is being fetched: it ends unstarted (container_task.go)
	}
	t.mu.Unlock()
	if writeNotice {
		path := t.noticeOf(k)
		own := path != t.noticePath(k)
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := putNotice(path, own, notice); err != nil {
			t.log.Warn("notice not written", "job_id", k.job, "err", err)
		}
		t.shells.notice(k, notice) // shown in the task's shells (shell.go)
	}
	if !first {
		return
	}
	if t.signalOnce(tk, k, grace) {
		return
	}
	// The shim has not recorded its job's pid yet (it started a moment
	// ago): signal as soon as it has, or give up once the task has ended.
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if t.signalOnce(tk, k, grace) {
				return
			}
		}
	}()
}

// signalOnce signals the task's job if its pid is known, and reports
// whether there is nothing left to wait for: it was signalled, or it has
// ended.
func (t *tasks) signalOnce(tk *task, k taskKey, grace time.Duration) bool {
	t.mu.Lock()
	pid, ended := tk.jobPID(), tk.exited != nil
	t.mu.Unlock()
	if pid > 0 && !ended {
		t.signal(tk, k, pid, grace)
	}
	return pid > 0 || ended
}

// signal sends SIGTERM to a task's process group, then SIGKILL after grace.
func (t *tasks) signal(tk *task, k taskKey, pid int, grace time.Duration) {
	syscall.Kill(-pid, syscall.SIGTERM)
	t.log.Info("task stopping", "job_id", k.job, "rank", k.rank, "grace", grace)
	kill := func() { syscall.Kill(-pid, syscall.SIGKILL) }
	if grace <= 0 {
		kill()
		return
	}
	t.mu.Lock()
	tk.kill = time.AfterFunc(grace, kill)
	t.mu.Unlock()
}

// stopAll stops every running task (SIGTERM, SIGKILL after grace) and
// waits until they have ended or ctx is done.
func (t *tasks) stopAll(ctx context.Context, grace time.Duration) int {
	var keys []taskKey
	t.mu.Lock()
	for k, tk := range t.byKey {
		if tk.exited == nil {
			keys = append(keys, k)
		}
	}
	t.mu.Unlock()
	for _, k := range keys {
		t.stop(k, grace, "")
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		running := 0
		for _, st := range t.statuses() {
			if st.State == api.TaskRunning {
				running++
			}
		}
		if running == 0 {
			return len(keys)
		}
		select {
		case <-ctx.Done():
			return len(keys)
		case <-tick.C:
		}
	}
}

// statuses reports every task.
func (t *tasks) statuses() []api.TaskStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]api.TaskStatus, 0, len(t.byKey))
	for k, tk := range t.byKey {
		if tk.exited != nil {
			out = append(out, *tk.exited)
			continue
		}
		if tk.preparing {
			out = append(out, api.TaskStatus{JobID: k.job, Attempt: k.attempt, Rank: k.rank, State: api.TaskPreparing})
			continue
		}
		started := tk.startedAt
		out = append(out, api.TaskStatus{JobID: k.job, Attempt: k.attempt, Rank: k.rank, State: api.TaskRunning,
			PID: tk.jobPID(), StartedAt: &started, ImageDigest: tk.imageDigest()})
	}
	slices.SortFunc(out, func(a, b api.TaskStatus) int { return strings.Compare(a.JobID, b.JobID) })
	return out
}

// credentialVar reports whether an environment variable holds one of the
// credentials Corral reads from its environment (the join token, the
// bootstrap admin token, a client token): the agent's, or `corral up`'s,
// never passed on to a job, which could otherwise act as an agent or as
// the admin.
func credentialVar(k string) bool {
	switch k {
	case "CORRAL_JOIN_TOKEN", "CORRAL_ADMIN_TOKEN", "CORRAL_TOKEN":
		return true
	}
	return false
}

// has reports whether this agent tracks the job's attempt (attempt as
// written in CORRAL_ATTEMPT).
func (t *tasks) has(jobID, attempt string) bool {
	n, err := strconv.Atoi(attempt)
	if err != nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.byKey {
		if k.job == jobID && k.attempt == n {
			return true
		}
	}
	return false
}

// busyGPUs are the GPUs of running tasks.
func (t *tasks) busyGPUs() map[int]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]bool{}
	for _, tk := range t.byKey {
		if tk.exited == nil {
			for _, g := range tk.spec.GPUs {
				out[g] = true
			}
		}
	}
	return out
}

// forget drops an exited task once the server no longer lists it.
func (t *tasks) forget(k taskKey) {
	t.mu.Lock()
	tk := t.byKey[k]
	if tk == nil || tk.exited == nil {
		t.mu.Unlock()
		return
	}
	delete(t.byKey, k)
	t.mu.Unlock()
	if tk.state != "" {
		os.RemoveAll(tk.state)
	}
	dropNotice(tk)
}
