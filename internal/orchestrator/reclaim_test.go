package orchestrator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/attach"
	"github.com/corral-sched/corral/internal/exec"
)

// TestClassIdlePolicy: the classes' idle settings have defaults, are
// changed by class, and are refused when they could never act: an idle
// window not shorter than the interactive maximum, a warning not shorter
// than the window, a class that is not interactive.
func TestClassIdlePolicy(t *testing.T) {
	h := startInteractive(t, newClock(), Limits{MaxInteractiveTime: 8 * time.Hour})
	ctx := context.Background()
	if c := h.o.Policies().Classes[api.ClassInteractive]; c.IdleWindow.Duration() != time.Hour || c.IdleWarn.Duration() != 10*time.Minute || c.IdleThreshold != 5 {
		t.Fatalf("defaults: %+v", c)
	}
	bad := []struct {
		u     map[string]api.ClassIdleUpdate
		field string
	}{
		{map[string]api.ClassIdleUpdate{"interactive": {IdleWindow: api.RawValue(`"8h"`)}}, "classes.interactive.idle_window"},
		{map[string]api.ClassIdleUpdate{"interactive-preemptible": {IdleWarn: api.RawValue(`"2h"`)}}, "classes.interactive-preemptible.idle_warn"},
		{map[string]api.ClassIdleUpdate{"interactive": {IdleThreshold: ptr(101)}}, "classes.interactive.idle_threshold"},
		{map[string]api.ClassIdleUpdate{"batch": {IdleThreshold: ptr(10)}}, "classes"},
	}
	for _, tc := range bad {
		_, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Classes: tc.u})
		if !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != tc.field {
			t.Errorf("%v: %v, want a 422 naming %s", tc.u, err, tc.field)
		}
	}
	if c := h.o.Policies().Classes[api.ClassInteractive]; c.IdleWindow.Duration() != time.Hour {
		t.Fatalf("a refused update changed the policy: %+v", c)
	}
	p, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Classes: map[string]api.ClassIdleUpdate{"interactive": {IdleWindow: api.RawValue(`"2h"`)}}})
	if err != nil || p.Classes["interactive"].IdleWindow.Duration() != 2*time.Hour || p.Classes["interactive"].IdleWarn.Duration() != 10*time.Minute {
		t.Fatalf("update: %+v %v", p.Classes, err)
	}
}

// TestIdleReclaim: an interactive job is not idle while a connection is
// attached, whatever its GPUs read; once the last one closes and its GPUs
// stay quiet, its owner is warned idle_warn before the idle_window ends,
// then it is stopped with the notice and ends canceled with reason idle.
// A batch job with quiet GPUs is left alone.
func TestIdleReclaim(t *testing.T) {
	clk := newClock()
	reg := attach.New(clk.now)
	h := startInteractive(t, clk, Limits{MaxInteractiveTime: 8 * time.Hour}, reg)
	ctx := context.Background()
	if _, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Classes: map[string]api.ClassIdleUpdate{
		"interactive": {IdleThreshold: ptr(50), IdleWindow: api.RawValue(`"10m"`), IdleWarn: api.RawValue(`"2m"`)}}}); err != nil {
		t.Fatal(err)
	}
	b := h.submit(api.SubmitRequest{Command: "batch", GPUCount: gpus(1)})
	j := h.submit(api.SubmitRequest{Command: "shell", GPUCount: gpus(1), Class: api.ClassInteractive})
	var readings []api.GPUReading
	for range 2 {
		tk := h.nextStart()
		h.o.Sink(exec.Update{JobID: tk.JobID, Kind: exec.Started, At: clk.now(), PID: 1})
		h.waitState(tk.JobID, api.StateRunning)
		readings = append(readings, api.GPUReading{Index: tk.Ranks[0].GPUs[0], Utilization: 0})
	}
	h.o.NodeSeen("n1", readings, nil, clk.now())
	done := reg.Open(j.ID)
	h.waitTicks() // the loop has seen the quiet GPUs
	clk.add(time.Hour)
	h.waitTicks()
	if v, _ := h.o.Job(j.ID); v.IdleEndsAt != nil || v.State != api.StateRunning {
		t.Fatalf("attached for an hour: idle_ends_at %v, %s", v.IdleEndsAt, v.State)
	}
	done()
	closed := clk.now()
	h.waitTicks() // idle from the close on
	clk.add(8*time.Minute + time.Second)
	v := h.waitFor(j.ID, func(v api.Job) bool { return v.IdleEndsAt != nil })
	if !v.IdleEndsAt.Equal(closed.Add(10*time.Minute)) || v.State != api.StateRunning {
		t.Fatalf("warning: idle_ends_at %v (want %v), %s", v.IdleEndsAt, closed.Add(10*time.Minute), v.State)
	}
	select {
	case s := <-h.ex.stops:
		t.Fatalf("stopped %s at the warning", s.jobID)
	default:
	}
	clk.add(2 * time.Minute)
	s := <-h.ex.stops
	if s.jobID != j.ID || s.grace != DefaultPreemptGrace {
		t.Fatalf("stop %+v, want %s with the preemption grace", s, j.ID)
	}
	h.ex.mu.Lock()
	notices := strings.Join(h.ex.notices, "\n")
	h.ex.mu.Unlock()
	if !strings.Contains(notices, j.ID) || !strings.Contains(notices, "reason idle") {
		t.Fatalf("notices %q", notices)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: clk.now(), ExitCode: 143, Signal: "terminated"})
	end := h.waitState(j.ID, api.StateCanceled)
	if end.Reason != api.ReasonIdle {
		t.Fatalf("ended %s %q (%s)", end.State, end.Reason, end.Message)
	}
	if v, _ := h.o.Job(b.ID); v.State != api.StateRunning || v.IdleEndsAt != nil {
		t.Fatalf("the batch job: %s, idle_ends_at %v", v.State, v.IdleEndsAt)
	}
}

// waitFor waits until the job satisfies ok.
func (h *harness) waitFor(id string, ok func(api.Job) bool) api.Job {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := h.o.Changed()
		j, err := h.o.Job(id)
		if err != nil {
			h.t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("job %s: condition not reached (%+v)", id, j)
		}
	}
}

// waitTicks waits until the loop has run at least one tick from now: every
// tick ends with a cycle, so two more cycles than now hold a whole tick.
func (h *harness) waitTicks() {
	h.t.Helper()
	before := h.o.Status().Cycles
	deadline := time.Now().Add(5 * time.Second)
	for h.o.Status().Cycles < before+2 {
		if time.Now().After(deadline) {
			h.t.Fatal("the loop did not tick")
		}
		time.Sleep(5 * time.Millisecond) // poll: a tick with nothing to change commits nothing to wait on
	}
}
