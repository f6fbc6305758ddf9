package ray

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/batchscript"
	"github.com/corral-sched/corral/internal/breaker"
	"github.com/corral-sched/corral/internal/exec"
)

// key names an attempt.
type key struct {
	job     string
	attempt int
}

// attempt is one attempt the executor follows: one Ray job per rank (a
// Ray job's entrypoint runs on one node, so a gang of K nodes is K jobs,
// each pinned to its node, with Corral's rank variables).
type attempt struct {
	task       exec.Task
	ranks      []*rankJob
	started    bool         // Started was sent
	stopWanted bool         // a stop is to be sent to the ranks still running
	busy       bool         // a poll of it is under way (one at a time)
	failed     *exec.Update // the first rank's end that was a failure
}

// rankJob is one rank's Ray job.
type rankJob struct {
	req       SubmitRequest
	logPath   string
	submitted bool         // Ray has it (or had it: adopted)
	running   bool         // Ray said RUNNING or ended
	end       *exec.Update // its end, once Ray said so
	logOff    int64
	pid       int
}

// RankSubmissionID is the Ray submission_id of one rank of a job's
// attempt: the attempt's id for rank 0, with "-rank<R>" for the others.
func RankSubmissionID(jobID string, attempt, rank int) string {
	if rank == 0 {
		return SubmissionID(jobID, attempt)
	}
	return SubmissionID(jobID, attempt) + "-rank" + strconv.Itoa(rank)
}

// rankLogPath is where rank r's output goes: the attempt's log for rank 0,
// N.rankR.log beside it for the others (as the orchestrator's RankLogPath
// names them).
func rankLogPath(logPath string, r int) string {
	if r == 0 || logPath == "" {
		return logPath
	}
	return strings.TrimSuffix(logPath, ".log") + ".rank" + strconv.Itoa(r) + ".log"
}

// ranksOf lists a task's ranks (a task without Ranks is one rank on NodeID).
func ranksOf(t exec.Task) []exec.Rank {
	if len(t.Ranks) > 0 {
		return t.Ranks
	}
	return []exec.Rank{{NodeID: t.NodeID, GPUs: t.GPUs, GPUUUIDs: t.GPUUUIDs}}
}

// Start submits the attempt's Ray jobs in the background and returns: it
// is called from the orchestrator's loop, which must not wait on the
// network. The submissions go at once, and again at each poll until the
// head takes them (the submission_id makes a retry idempotent): a cluster
// that cannot be reached is no failure. A submission Ray refuses ends the
// attempt (an Exited update with Err). A node the cluster does not have is
// refused here.
func (e *Executor) Start(ctx context.Context, t exec.Task) error {
	if t.Image != "" {
		return fmt.Errorf("ray: the Ray executor does not run container images (image %s): run the job on Corral's agents (pool %q), or without --image", t.Image, "agents")
	}
	ranks := ranksOf(t)
	e.mu.Lock()
	polled := e.polled
	nodes := make([]NodeState, len(ranks))
	known := make([]bool, len(ranks))
	for i, r := range ranks {
		nodes[i], known[i] = e.nodes[r.NodeID]
	}
	e.mu.Unlock()
	for i, r := range ranks {
		if known[i] {
			continue
		}
		// Not alive at the last poll. Before any poll (a test driving the
		// executor alone), or while the head is away, the node's IP is
		// read from its Corral name.
		ip, named := nodeIP(r.NodeID)
		if !named || (polled && e.br.Snapshot().State == breaker.Closed) {
			return fmt.Errorf("ray: node %s is not an alive node of the Ray cluster at %s", r.NodeID, e.cfg.Address)
		}
		nodes[i] = NodeState{NodeIP: ip}
	}
	a := &attempt{task: t}
	for i, r := range ranks {
		a.ranks = append(a.ranks, &rankJob{req: e.request(t, i, r, nodes[i].NodeIP, nodes[0].NodeIP, len(ranks)), logPath: rankLogPath(t.LogPath, i)})
	}
	k := key{t.JobID, t.Attempt}
	e.mu.Lock()
	e.tasks[k] = a
	e.mu.Unlock()
	go e.pollOne(context.WithoutCancel(ctx), k)
	return nil
}

// request is the Jobs API submission of rank r (on the node at ip) of t.
func (e *Executor) request(t exec.Task, rank int, r exec.Rank, ip, masterIP string, numNodes int) SubmitRequest {
	env := maps.Clone(t.Env)
	if env == nil {
		env = map[string]string{}
	}
	port := strconv.Itoa(api.MasterPort(t.JobID, t.Attempt))
	for k, v := range map[string]string{
		"CORRAL_JOB_ID": t.JobID, "CORRAL_ATTEMPT": strconv.Itoa(t.Attempt), "CORRAL_NODE_ID": r.NodeID,
		"CORRAL_NUM_GPUS": strconv.Itoa(len(r.GPUs)), "CORRAL_NODE_RANK": strconv.Itoa(rank), "CORRAL_NUM_NODES": strconv.Itoa(numNodes),
		"CORRAL_MASTER_ADDR": masterIP, "CORRAL_MASTER_PORT": port,
		"MASTER_ADDR": masterIP, "MASTER_PORT": port, "NODE_RANK": strconv.Itoa(rank),
		"RAY_JOB_STOP_WAIT_TIME_S": strconv.Itoa(int((e.cfg.StopWait + time.Second - 1) / time.Second)),
	} {
		env[k] = v
	}
	entry := t.Command
	if t.Script != "" { // a batch script: written on the node, run by its #! line
		entry = batchscript.ShellCommand(t.Script, t.Command)
	}
	if t.Workdir != "" {
		entry = "cd " + shellQuote(t.Workdir) + " || exit 1\n" + entry
	}
	gpus := float64(len(r.GPUs))
	req := SubmitRequest{Entrypoint: entry, SubmissionID: RankSubmissionID(t.JobID, t.Attempt, rank),
		RuntimeEnv:          &RuntimeEnv{EnvVars: env},
		Metadata:            map[string]string{"corral_job_id": t.JobID, "corral_attempt": strconv.Itoa(t.Attempt), "corral_rank": strconv.Itoa(rank)},
		EntrypointNumGPUs:   &gpus,
		EntrypointResources: map[string]float64{"node:" + ip: 0.001}}
	if t.CPUs > 0 {
		c := t.CPUs
		req.EntrypointNumCPUs = &c
	}
	if t.MemMiB > 0 {
		m := t.MemMiB << 20
		req.EntrypointMemory = &m
	}
	return req
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Adopt follows an attempt that was submitted before the server restarted:
// the next poll finds it running, ended, or unknown to Ray (lost).
func (e *Executor) Adopt(ctx context.Context, t exec.Task) error {
	a := &attempt{task: t}
	for i := range ranksOf(t) {
		r := &rankJob{submitted: true, logPath: rankLogPath(t.LogPath, i)}
		r.req.SubmissionID = RankSubmissionID(t.JobID, t.Attempt, i)
		if fi, err := os.Stat(r.logPath); err == nil {
			r.logOff = fi.Size() // what earlier polls copied
		}
		a.ranks = append(a.ranks, r)
	}
	e.mu.Lock()
	e.tasks[key{t.JobID, t.Attempt}] = a
	e.mu.Unlock()
	return nil
}

// Stop asks Ray to stop the attempt's jobs, in the background: Ray sends
// SIGTERM, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S (Config.StopWait,
// set at submission; grace cannot change it afterwards). Unreachable, the
// stop is sent once the head answers. An attempt none of whose jobs was
// submitted ends at once.
func (e *Executor) Stop(ctx context.Context, jobID string, att int, grace time.Duration) error {
	k := key{jobID, att}
	e.mu.Lock()
	a, ok := e.tasks[k]
	never := ok && !a.busy
	if ok {
		for _, r := range a.ranks {
			never = never && !r.submitted
		}
	}
	if never {
		delete(e.tasks, k)
	} else if ok {
		a.stopWanted = true
	}
	e.mu.Unlock()
	switch {
	case never:
		e.cfg.Sink(exec.Update{JobID: jobID, Attempt: att, Kind: exec.Exited, At: e.cfg.Now(), ExitCode: 128 + 15, Signal: "terminated"})
	case ok:
		go e.pollOne(context.WithoutCancel(ctx), k)
	}
	return nil
}

// Run polls the cluster's nodes and the followed jobs until ctx ends.
func (e *Executor) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		e.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll does one round: nodes, then each followed attempt. Run calls it;
// tests may call it directly.
func (e *Executor) Poll(ctx context.Context) {
	e.syncNodes(ctx)
	e.mu.Lock()
	keys := make([]key, 0, len(e.tasks))
	for k := range e.tasks {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		e.pollOne(ctx, k)
	}
}

// unreachable says whether err means the head could not be asked.
func unreachable(err error) bool {
	return errors.Is(err, breaker.ErrOpen) || Unreachable(err)
}

// pollOne brings one attempt forward: submits its jobs, sends its stops,
// reads their states and logs, and reports what changed. One poll of an
// attempt runs at a time; the others return at once.
func (e *Executor) pollOne(ctx context.Context, k key) {
	e.mu.Lock()
	a, ok := e.tasks[k]
	if ok && a.busy {
		ok = false
	}
	if ok {
		a.busy = true
	}
	e.mu.Unlock()
	if !ok {
		return
	}
	defer func() {
		e.mu.Lock()
		a.busy = false
		e.mu.Unlock()
	}()
	// Fields of a and its ranks are written only here (busy) and read by
	// Stop under e.mu; writes that Stop reads take the lock.

	// 1. Submit what Ray does not have yet.
	for _, r := range a.ranks {
		if r.submitted {
			continue
		}
		err := e.call(func() error { return e.c.submit(ctx, r.req) })
		switch {
		case unreachable(err):
			e.log.Warn("Ray head unreachable; the job is submitted once it answers", "job_id", k.job, "err", err)
			return
		case err != nil:
			e.stopRanks(ctx, k, a)
			e.finish(k, exec.Update{ExitCode: -1, Err: fmt.Errorf("ray: submit %s: %w", r.req.SubmissionID, err)})
			return
		}
		e.mu.Lock()
		r.submitted = true
		e.mu.Unlock()
		e.log.Info("submitted", "job_id", k.job, "submission_id", r.req.SubmissionID)
	}
	// 2. Stops.
	e.mu.Lock()
	stop := a.stopWanted
	e.mu.Unlock()
	if stop && e.stopRanks(ctx, k, a) {
		e.mu.Lock()
		a.stopWanted = false
		e.mu.Unlock()
	}
	// 3. States and logs.
	for _, r := range a.ranks {
		if r.end != nil {
			continue
		}
		var d JobDetails
		err := e.call(func() (err error) { d, err = e.c.job(ctx, r.req.SubmissionID); return err })
		switch {
		case errors.Is(err, ErrNotFound):
			e.stopRanks(ctx, k, a)
			e.finish(k, exec.Update{ExitCode: -1, Lost: api.ReasonLost,
				Err: fmt.Errorf("the Ray cluster at %s no longer knows job %s (its head restarted?)", e.cfg.Address, r.req.SubmissionID)})
			return
		case err != nil:
			return // unreachable: the breaker counts it; the attempt keeps its state
		}
		if d.DriverInfo != nil && r.pid == 0 {
			// Also once it has ended: a driver that ended before the
			// first poll saw it run still started, with this pid.
			r.pid, _ = strconv.Atoi(d.DriverInfo.PID)
		}
		switch d.Status {
		case StatusPending:
		case StatusRunning:
			e.copyLogs(ctx, k, r)
			r.running = true
		case StatusSucceeded, StatusFailed, StatusStopped:
			e.copyLogs(ctx, k, r)
			u := exitOf(d)
			r.running, r.end = true, &u
			if a.failed == nil && (u.ExitCode != 0 || u.Err != nil) {
				a.failed = &u
			}
		default:
			e.log.Warn("unknown Ray job status", "job_id", k.job, "status", d.Status)
		}
	}
	// 4. Started once rank 0 runs; a rank that failed stops the gang; the
	// attempt ends when every rank has, with the first failure's status.
	if a.ranks[0].running && !a.started {
		a.started = true
		e.cfg.Sink(exec.Update{JobID: k.job, Attempt: k.attempt, Kind: exec.Started, At: e.cfg.Now(), PID: a.ranks[0].pid})
	}
	failed, done := a.failed, true
	for _, r := range a.ranks {
		done = done && r.end != nil
	}
	switch {
	case done && failed != nil:
		e.finish(k, *failed)
	case done:
		e.finish(k, *a.ranks[0].end)
	case failed != nil:
		e.mu.Lock()
		a.stopWanted = true // the next poll stops the ranks left
		e.mu.Unlock()
	}
}

// stopRanks posts a stop for every rank Ray has that has not ended; it
// reports whether all went (false: the head could not be asked).
func (e *Executor) stopRanks(ctx context.Context, k key, a *attempt) bool {
	for _, r := range a.ranks {
		if !r.submitted || r.end != nil {
			continue
		}
		err := e.call(func() error { return e.c.stop(ctx, r.req.SubmissionID) })
		switch {
		case errors.Is(err, ErrNotFound):
		case unreachable(err):
			e.log.Warn("stop not sent; retried when the Ray head answers", "job_id", k.job, "err", err)
			return false
		case err != nil:
			e.log.Warn("stop refused by Ray", "job_id", k.job, "submission_id", r.req.SubmissionID, "err", err)
		}
	}
	return true
}

// exitOf is the Exited update of a job in a terminal status (the update's
// job, attempt, kind and time are set by finish).
func exitOf(d JobDetails) exec.Update {
	u := exec.Update{}
	code := -1
	if d.DriverExitCode != nil {
		code = *d.DriverExitCode
	}
	switch {
	case d.Status == StatusSucceeded:
		u.ExitCode = 0
	case code < -1 || (d.Status == StatusStopped && code == -1):
		// Python's returncode is -N for a driver killed by signal N; a
		// stopped job without one was terminated.
		sig := 15
		if code < -1 {
			sig = -code
		}
		u.ExitCode, u.Signal = 128+sig, exec.SignalName(sig)
	case d.DriverExitCode != nil:
		u.ExitCode = code
	default: // failed before its driver ran (runtime env, scheduling)
		u.ExitCode, u.Err = -1, fmt.Errorf("ray: job %s failed before its entrypoint ran: %s", d.SubmissionID, d.Message)
	}
	return u
}

// finish forgets the attempt and reports its end, timed by the server's
// clock as agents' reports are.
func (e *Executor) finish(k key, u exec.Update) {
	e.mu.Lock()
	_, ok := e.tasks[k]
	delete(e.tasks, k)
	e.mu.Unlock()
	if !ok {
		return
	}
	u.JobID, u.Attempt, u.Kind, u.At = k.job, k.attempt, exec.Exited, e.cfg.Now()
	e.cfg.Sink(u)
}

// copyLogs appends what Ray's log of the rank holds beyond what was
// already copied to the rank's log file.
func (e *Executor) copyLogs(ctx context.Context, k key, r *rankJob) {
	if r.logPath == "" {
		return
	}
	var logs string
	if err := e.call(func() (err error) { logs, err = e.c.logs(ctx, r.req.SubmissionID); return err }); err != nil {
		return
	}
	if int64(len(logs)) <= r.logOff {
		return
	}
	if err := os.MkdirAll(filepath.Dir(r.logPath), 0o700); err != nil {
		e.log.Warn("job log not written", "job_id", k.job, "err", err)
		return
	}
	f, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		e.log.Warn("job log not written", "job_id", k.job, "err", err)
		return
	}
	defer f.Close()
	data := logs[r.logOff:]
	r.logOff = int64(len(logs))
	capped := false
	if limit := e.cfg.MaxLogSize; limit > 0 {
		st, err := f.Stat()
		if err != nil || st.Size() >= limit {
			return // capped: the marker is there, the rest is dropped
		}
		if st.Size()+int64(len(data)) > limit {
			data, capped = data[:limit-st.Size()], true
		}
	}
	if capped {
		data += fmt.Sprintf("\ncorral: the stored log reached its limit of %d bytes (--max-log-size of the server); further output of this attempt is dropped\n", e.cfg.MaxLogSize)
	}
	if _, err := f.WriteString(data); err != nil {
		e.log.Warn("job log not written", "job_id", k.job, "err", err)
	}
}

// Health reports the executor's breaker, for GET /orchestrator/status.
func (e *Executor) Health() []exec.Health {
	h := exec.BreakerHealth("ray", e.cfg.Pool, e.cfg.Address, e.br.Snapshot())
	e.mu.Lock()
	h.Nodes = len(e.nodes)
	e.mu.Unlock()
	return []exec.Health{h}
}
