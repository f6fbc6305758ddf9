package orchestrator

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestInteractiveSubmit: the class is checked and kept; interactive jobs
// get the interactive time limit by default and may not ask for more; a
// user's interactive GPUs (queued or running) stop at the cap.
func TestInteractiveSubmit(t *testing.T) {
	h := startLimited(t, Limits{MaxInteractiveGPUs: 2, MaxInteractiveTime: 8 * time.Hour, MaxRunTime: 24 * time.Hour})
	ctx := context.Background()
	bad := []struct {
		name  string
		req   api.SubmitRequest
		field string
	}{
		{"unknown class", api.SubmitRequest{Command: "x", Class: "urgent"}, "class"},
		{"interactive array", api.SubmitRequest{Command: "x", Class: api.ClassInteractive, Array: "0-3"}, "class"},
		{"longer than the interactive maximum", api.SubmitRequest{Command: "x", Class: api.ClassInteractive, TimeLimit: api.RawValue(`"9h"`)}, "time_limit"},
	}
	for _, tc := range bad {
		_, _, err := h.o.Submit(ctx, tc.req, "")
		if !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != tc.field {
			t.Errorf("%s: %v, want a 422 naming %s", tc.name, err, tc.field)
		}
	}
	b := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), Class: api.ClassBatch})
	if b.Class != "" || b.TimeLimit == nil || b.TimeLimit.Duration() != 24*time.Hour {
		t.Fatalf("batch: class %q, time_limit %v", b.Class, b.TimeLimit)
	}
	i := h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1), Class: api.ClassInteractive})
	if i.Class != api.ClassInteractive || i.TimeLimit == nil || i.TimeLimit.Duration() != 8*time.Hour {
		t.Fatalf("interactive: class %q, time_limit %v", i.Class, i.TimeLimit)
	}
	h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1), Class: api.ClassInteractivePreemptible})
	// A third interactive GPU for ana is refused; bob's first is not; ana's
	// batch jobs do not count.
	_, _, err := h.o.Submit(ctx, api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1), Class: api.ClassInteractive}, "")
	if e := api.AsError(err); e == nil || e.Status != http.StatusTooManyRequests || e.Code != "interactive_gpus_exceeded" {
		t.Fatalf("third interactive GPU: %v", err)
	}
	h.submit(api.SubmitRequest{Command: "x", User: "bob", GPUCount: gpus(2), Class: api.ClassInteractive})
	h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(4)})
	// Once one ends, ana may ask again.
	if _, _, err := h.o.Cancel(ctx, i.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.o.Submit(ctx, api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1), Class: api.ClassInteractive}, ""); err == nil {
		t.Fatal("a job being stopped still counts, until it has ended")
	}
	h.o.Sink(exec.Update{JobID: i.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 143, Signal: "terminated"})
	h.waitState(i.ID, api.StateCanceled)
	h.submit(api.SubmitRequest{Command: "x", User: "ana", GPUCount: gpus(1), Class: api.ClassInteractive})
}
