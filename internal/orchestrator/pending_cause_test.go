package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// TestPendingCause: a job kept out by the head job's backfill reservation
// and one kept out by a booking both say pending_reason "reservation", as
// clients written before the split read it, and tell the two apart in
// pending_cause, in GET /jobs/{id} and GET /queue alike; other reasons
// read the same in both fields.
func TestPendingCause(t *testing.T) {
	// The core's reasons are the API's (the core imports nothing).
	if sched.ReasonBackfillReserved != api.ReasonBackfillReserved || sched.ReasonBooking != api.ReasonBooking {
		t.Fatalf("sched and api disagree: %q/%q, %q/%q", sched.ReasonBackfillReserved, api.ReasonBackfillReserved, sched.ReasonBooking, api.ReasonBooking)
	}
	type want struct{ reason, cause string }
	for name, tc := range map[string]func(t *testing.T) (*harness, map[string]want){
		// 4 of 8 GPUs busy for 2 h, a head that needs all 8 (it holds
		// the other 4 for its reservation), then a 3-hour 4-GPU job of the
		// same user: it would fit on the held GPUs but delay the head.
		"backfill reservation": func(t *testing.T) (*harness, map[string]want) {
			clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
			h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Now: clk.now})
			// Under fair_share a head reserves only once it has waited
			// ReserveAfter; first-come first-served reserves at once.
			if _, err := h.o.SetPolicies(context.Background(), api.PoliciesUpdate{Policy: ptr(sched.PolicyFCFS)}); err != nil {
				t.Fatal(err)
			}
			run := h.submit(api.SubmitRequest{Command: "run", User: "cy", GPUCount: gpus(4), EstimatedDuration: api.RawValue(`"2h"`)})
			h.running(run.ID)
			head := h.submit(api.SubmitRequest{Command: "head", User: "cy", GPUCount: gpus(8)})
			later := h.submit(api.SubmitRequest{Command: "later", User: "cy", GPUCount: gpus(4), EstimatedDuration: api.RawValue(`"3h"`)})
			h.noStart()
			return h, map[string]want{
				head.ID:  {"insufficient_gpus", "insufficient_gpus"},
				later.ID: {"reservation", "backfill_reserved"},
			}
		},
		// An hour before booking vis (GPUs 0-3), a 3-hour job that needs
		// 6 GPUs would fit but for the booking.
		"booking": func(t *testing.T) (*harness, map[string]want) {
			h, _, _ := startBooked(t)
			long := h.submit(api.SubmitRequest{Command: "long", User: "bo", GPUCount: gpus(6), Class: api.ClassInteractive,
				EstimatedDuration: api.RawValue(`"3h"`)})
			h.noStart()
			return h, map[string]want{long.ID: {"reservation", "booking"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, wants := tc(t)
			queue := map[string]want{}
			for _, q := range h.o.Queue().QueuedJobs {
				queue[q.ID] = want{q.PendingReason, q.PendingCause}
			}
			for id, w := range wants {
				j, err := h.o.Job(id)
				if err != nil {
					t.Fatal(err)
				}
				if got := (want{j.PendingReason, j.PendingCause}); got != w {
					t.Errorf("job %s: reason/cause %v (%s), want %v", id, got, j.PendingMessage, w)
				}
				if got := queue[id]; got != w {
					t.Errorf("queue row %s: reason/cause %v, want %v", id, got, w)
				}
			}
		})
	}
}
