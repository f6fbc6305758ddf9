package orchestrator

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/attach"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// startInteractive runs an orchestrator on one 8-GPU node with limits, a
// settable clock and a fast tick.
func startInteractive(t *testing.T, clk *clock, l Limits, reg ...*attach.Registry) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ex := newFakeExec()
	var a *attach.Registry
	if len(reg) > 0 {
		a = reg[0]
	}
	o, err := New(ctx, Config{Store: memstore.New(), Executor: ex, Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(),
		Tick: 10 * time.Millisecond, CancelGrace: 3 * time.Second, Limits: l, Now: clk.now, Attach: a})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	h := &harness{t: t, o: o, ex: ex}
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// TestHoldsWaitAndExpire: a hold has an expiry and is named in the
// why-pending of the jobs it blocks; a hold with wait queues as an
// interactive job when the GPUs are taken and starts when they free
// (here, when the first hold expires); holds count in the interactive cap;
// release cancels a queued hold's job.
func TestHoldsWaitAndExpire(t *testing.T) {
	clk := newClock()
	h := startInteractive(t, clk, Limits{MaxInteractiveGPUs: 4, MaxInteractiveTime: 8 * time.Hour})
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "x", GPUCount: 1, Duration: api.RawValue(`"9h"`)}, "ana"); !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != "duration" {
		t.Fatalf("9h hold: %v, want a 422 naming duration", err)
	}
	nb, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "nb", GPUCount: 2, Duration: api.RawValue(`"1h"`)}, "ana")
	if err != nil || nb.Queued || nb.ExpiresAt == nil || !nb.ExpiresAt.Equal(clk.now().Add(time.Hour)) {
		t.Fatalf("hold: %+v %v", nb, err)
	}
	a := h.submit(api.SubmitRequest{Command: "a", User: "bob", GPUCount: gpus(6)})
	if task := h.nextStart(); task.JobID != a.ID {
		t.Fatalf("started %s", task.JobID)
	}
	// Without wait: 409, as before.
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "w", GPUCount: 2}, "ana"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("hold with no free GPUs: %v, want a conflict", err)
	}
	w, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "w", GPUCount: 2, Wait: true, Duration: api.RawValue(`"30m"`)}, "ana")
	if err != nil || !w.Queued || w.Name != "w" || w.Poll != "/queue/"+w.JobID {
		t.Fatalf("hold with wait: %+v %v", w, err)
	}
	j := h.waitPending(w.JobID, "insufficient_gpus")
	if j.Class != api.ClassInteractive || j.Hold != "w" || !strings.Contains(j.PendingMessage, "GPUs 0-1 on n1 held by ana's hold nb until 10:00 UTC") {
		t.Fatalf("queued hold: class %q hold %q, pending %q", j.Class, j.Hold, j.PendingMessage)
	}
	if owner, ok := h.o.HoldOwner(w.JobID); !ok || owner != "ana" {
		t.Fatalf("owner of the queued hold: %q %v", owner, ok)
	}
	// ana has 4 interactive GPUs held or queued: a fifth is refused.
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "y", GPUCount: 1, Wait: true}, "ana"); api.AsError(err) == nil || api.AsError(err).Status != http.StatusTooManyRequests {
		t.Fatalf("fifth interactive GPU: %v, want 429", err)
	}
	// Without wait, the route's old answers: here 409, not the cap's 429.
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "y", GPUCount: 1}, "ana"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("fifth GPU without wait: %v, want 409", err)
	}
	// nb expires: its GPUs go to the queued hold.
	clk.add(time.Hour)
	if task := h.nextStart(); task.JobID != w.JobID || task.Command != "sleep 1800" {
		t.Fatalf("started %s %q, want the queued hold", task.JobID, task.Command)
	}
	if _, err := h.o.FeatureOps().Holds.Release(ctx, "nb"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("nb after its expiry: %v", err)
	}
	h.o.mu.RLock()
	u := h.o.ledger.UserUsage("ana", clk.now())
	h.o.mu.RUnlock()
	if u < 2*3600-1 {
		t.Fatalf("ana's usage after a 2-GPU hour: %v GPU-seconds", u)
	}
	r, err := h.o.FeatureOps().Holds.Release(ctx, w.JobID)
	if err != nil || r.ReleasedAt == nil {
		t.Fatalf("release of the queued hold: %+v %v", r, err)
	}
	h.o.Sink(exec.Update{JobID: w.JobID, Kind: exec.Exited, At: clk.now(), ExitCode: 143, Signal: "terminated"})
	h.waitState(w.JobID, api.StateCanceled)
}

// TestHoldUsageSurvivesRestart: an ended hold's GPU time is in its user's
// usage after a restart on the same store, though no job records it.
func TestHoldUsageSurvivesRestart(t *testing.T) {
	clk := newClock()
	st := memstore.New() // the same store across the restart
	open := func() (*Orchestrator, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		o, err := New(ctx, Config{Store: st, Executor: newFakeExec(), Nodes: []Node{simNode("n1", 8)}, DataDir: t.TempDir(),
			Tick: time.Hour, Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { o.Run(ctx); close(done) }()
		return o, func() { cancel(); <-done }
	}
	usage := func(o *Orchestrator) float64 {
		o.mu.RLock()
		defer o.mu.RUnlock()
		return o.ledger.UserUsage("ana", clk.now())
	}
	o, stop := open()
	ctx := context.Background()
	if _, err := o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "nb", GPUCount: 2}, "ana"); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Hour)
	if _, err := o.FeatureOps().Holds.Release(ctx, "nb"); err != nil {
		t.Fatal(err)
	}
	// A policy change in a later batch keeps the stored usage.
	if _, err := o.SetPolicies(ctx, api.PoliciesUpdate{Backfill: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	before := usage(o)
	stop()
	if before < 7199 {
		t.Fatalf("usage after a 2-GPU hour: %v", before)
	}
	o, stop = open()
	defer stop()
	if after := usage(o); after < before-1 || after > before+1 {
		t.Fatalf("usage after a restart: %v, want %v", after, before)
	}
}
