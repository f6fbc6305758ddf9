package slurm

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

// Run polls Slurm every Config.Poll until ctx ends: nodes first, then the
// attempts' states.
func (e *Executor) Run(ctx context.Context) error {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		e.PollOnce(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PollOnce syncs nodes and attempts once.
func (e *Executor) PollOnce(ctx context.Context) {
	if e.cfg.Book != nil {
		if err := e.syncNodes(ctx); err != nil {
			e.cfg.Logger.Warn("slurm: nodes not read", "err", err)
		}
	}
	if err := e.syncJobs(ctx); err != nil {
		e.cfg.Logger.Warn("slurm: job states not read", "err", err)
	}
}

// syncNodes registers Slurm's nodes (new or changed), says the live ones
// are seen, the down ones down, and cordons the drained ones (uncordoning
// those it cordoned once Slurm resumes them).
func (e *Executor) syncNodes(ctx context.Context) error {
	out, err := e.cfg.Runner.Run(ctx, "scontrol", "show", "-o", "node")
	if err != nil {
		return err
	}
	nodes, err := ParseNodes(out)
	if err != nil {
		return err
	}
	now := e.cfg.Now()
	for _, n := range nodes {
		if e.cfg.Partition != "" && !slices.Contains(n.Partitions, e.cfg.Partition) {
			continue
		}
		e.mu.Lock()
		old, known := e.nodes[n.Name]
		wasCordoned := e.cordoned[n.Name]
		e.mu.Unlock()
		if !known || !sameNode(old, n) {
			if err := e.cfg.Book.RegisterNode(ctx, n.Registration(e.cfg.Version), n.Addr); err != nil {
				e.cfg.Logger.Warn("slurm: node not registered", "node", n.Name, "err", err)
				continue
			}
			e.mu.Lock()
			e.nodes[n.Name] = n
			e.mu.Unlock()
		}
		if n.Down() {
			e.cfg.Book.NodeDown(n.Name, now)
		} else {
			e.cfg.Book.NodeSeen(n.Name, nil, nil, now)
		}
		switch {
		case n.Drained() && !wasCordoned:
			if _, err := e.cfg.Book.SetNodeState(ctx, n.Name, "cordon"); err == nil {
				e.mu.Lock()
				e.cordoned[n.Name] = true
				e.mu.Unlock()
			}
		case !n.Drained() && wasCordoned:
			if _, err := e.cfg.Book.SetNodeState(ctx, n.Name, "uncordon"); err == nil {
				e.mu.Lock()
				delete(e.cordoned, n.Name)
				e.mu.Unlock()
			}
		}
	}
	return nil
}

// sameNode reports whether a node's registration would not change.
func sameNode(a, b NodeInfo) bool {
	return a.Addr == b.Addr && a.Hostname == b.Hostname && slices.Equal(a.GPUs, b.GPUs)
}

// syncJobs asks squeue for every attempt's state at once (-t all keeps the
// jobs Slurm still remembers after they end), reports starts and ends, and
// looks further (sacct, scontrol, the exit status file) for the jobs
// squeue no longer lists.
func (e *Executor) syncJobs(ctx context.Context) error {
	e.mu.Lock()
	byID := map[string]*attempt{}
	var unfound []*attempt
	for _, a := range e.attempts {
		if a.slurmID == "" {
			unfound = append(unfound, a)
			continue
		}
		byID[a.slurmID] = a
	}
	e.mu.Unlock()
	for _, a := range unfound { // adopted while Slurm did not answer
		if err := e.adopt(ctx, a); err != nil {
			return err
		}
		e.mu.Lock()
		stopping, id, started, grace := a.stopping, a.slurmID, a.started, a.grace
		e.mu.Unlock()
		if stopping && id != "" {
			e.signal(ctx, a.task.JobID, a.task.Attempt, id, started, grace)
		}
	}
	if len(byID) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(byID))
	out, err := e.cfg.Runner.Run(ctx, "squeue", "-h", "-t", "all", "-j", strings.Join(ids, ","), "-o", "%i|%T")
	if err != nil && !(len(ids) == 1 && unknownJob(err)) {
		return err // one unknown id alone makes squeue fail: it is gone; anything else is asked again
	}
	states := ParseSqueue(out)
	for _, id := range ids {
		a := byID[id]
		st, listed := states[id]
		var info JobInfo
		switch {
		case listed && !final(st):
			if running(st) {
				e.started(a)
			}
			continue
		case listed:
			info, _ = e.lookup(ctx, id)
			info.State = st
		default:
			var ok bool
			if info, ok = e.lookup(ctx, id); !ok {
				continue // Slurm did not answer: ask again at the next poll
			}
			if info.State != "" && !final(info.State) {
				if running(info.State) {
					e.started(a)
				}
				continue
			}
		}
		e.finish(a, info)
	}
	return nil
}

// lookup asks sacct (unless accounting is off), then scontrol, about a
// job; State "" when neither knows it. ok is false when scontrol failed
// for another reason than an unknown job.
func (e *Executor) lookup(ctx context.Context, id string) (info JobInfo, ok bool) {
	e.mu.Lock()
	noAcct := e.noAcct
	e.mu.Unlock()
	if !noAcct {
		out, err := e.cfg.Runner.Run(ctx, "sacct", "-X", "-n", "-P", "-j", id, "-o", "JobID,State,ExitCode")
		if err == nil {
			if info, perr := ParseSacct(out); perr == nil {
				return info, true
			}
		} else if strings.Contains(err.Error(), "accounting storage is disabled") || strings.Contains(string(out), "accounting storage is disabled") {
			e.mu.Lock()
			e.noAcct = true
			e.mu.Unlock()
		}
	}
	out, err := e.cfg.Runner.Run(ctx, "scontrol", "show", "-o", "job", id)
	if err != nil {
		return JobInfo{ID: id}, unknownJob(err)
	}
	info, err = ParseScontrolJob(out)
	if err != nil {
		return JobInfo{ID: id}, false
	}
	return info, true
}

// unknownJob reports whether a command failed because Slurm does not know
// the job (any more).
func unknownJob(err error) bool {
	return strings.Contains(err.Error(), "Invalid job id")
}

// started sends Started once.
func (e *Executor) started(a *attempt) {
	e.mu.Lock()
	first := !a.started
	a.started = true
	e.mu.Unlock()
	if first {
		pid, _ := strconv.Atoi(a.slurmID)
		e.cfg.Sink(exec.Update{JobID: a.task.JobID, Attempt: a.task.Attempt, Kind: exec.Started, At: e.cfg.Now(), PID: pid})
	}
}

// finish sends the attempt's Exited (after a Started, if none was sent)
// and forgets it.
func (e *Executor) finish(a *attempt, info JobInfo) {
	k := key{a.task.JobID, a.task.Attempt}
	e.mu.Lock()
	if e.attempts[k] != a {
		e.mu.Unlock()
		return
	}
	delete(e.attempts, k)
	e.mu.Unlock()
	u := e.exitUpdate(a, info)
	if u.Lost == "" {
		e.started(a)
	}
	e.cfg.Logger.Info("slurm job ended", "job_id", k.job, "attempt", k.attempt, "slurm_job", a.slurmID, "state", info.State, "exit_code", u.ExitCode, "lost", u.Lost)
	e.cfg.Sink(u)
}
