package agent

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// adopt finds the tasks a previous agent left (their records). With
// detach, a task whose shim still runs is adopted and watched; otherwise
// (the in-process agent, whose jobs must not outlive it) what is left is
// killed. Ended tasks are reported with their status.
func (t *tasks) adopt(ctx context.Context) int {
	entries, _ := os.ReadDir(filepath.Join(t.stateDir, "tasks"))
	n := 0
	drained := -1 // whether the last shim host has read all its input: unknown yet
	for _, e := range entries {
		path := filepath.Join(t.stateDir, "tasks", e.Name())
		r, err := readRecord(path) // record.go: a record, or an earlier version's directory
		if err != nil || r.Spec == nil {
			os.RemoveAll(path) // never launched (its agent died writing it), or not a task's
			continue
		}
		if r.Hosted && r.ShimPID == 0 && r.Exit == nil {
			// Sent to a shim host, or not yet: once the last host has read
			// all its input, the record says which (shimhost.go).
			if drained < 0 {
				drained = 0
				if hostDrained(t.stateDir) {
					drained = 1
				}
			}
			if drained == 1 {
				r, err = readRecord(path)
				if err != nil {
					continue
				}
				if r.ShimPID == 0 && r.Exit == nil {
					// Never taken by a host: it never runs. Not reporting
					// it, the server requeues the attempt (which never
					// started) without counting a retry.
					t.log.Info("dropped a task its agent never launched", "job_id", r.Spec.JobID, "attempt", r.Spec.Attempt, "rank", r.Spec.Rank)
					os.Remove(path)
					continue
				}
			}
		}
		spec, shim := *r.Spec, r.ShimPID
		tk := &task{spec: spec, state: path, startedAt: r.At, notice: r.Notice}
		if tk.startedAt.IsZero() {
			tk.startedAt = time.Now().UTC()
		}
		t.mu.Lock()
		t.byKey[keyOf(spec)] = tk
		t.mu.Unlock()
		n++
		switch {
		case r.Exit != nil:
			t.reap(tk)
		case !alive(shim):
			t.reap(tk) // no exit file: lost
		case !t.detach:
			syscall.Kill(shim, syscall.SIGTERM) // the shim kills its job and writes why
			go t.watch(ctx, tk, shim)
		default:
			t.log.Info("task adopted", "job_id", spec.JobID, "attempt", spec.Attempt, "rank", spec.Rank, "shim", shim)
			t.armSignal(tk) // jobio.go: its --signal, still to come
			go t.watch(ctx, tk, shim)
		}
	}
	return n
}

// watch waits for an adopted task's shim to end (it is not our child, so
// there is nothing to wait on but its state).
func (t *tasks) watch(ctx context.Context, tk *task, shim int) {
	tick := time.NewTicker(adoptPoll)
	defer tick.Stop()
	for {
		if _, ok := readExit(tk.state); ok || !alive(shim) {
			t.reap(tk)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
