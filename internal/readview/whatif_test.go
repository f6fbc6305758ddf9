package readview

import (
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

func TestWhatIf(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	// One node of 4 GPUs, 2 of them busy for an hour; the job asks for 4.
	snap := func() sched.Snapshot {
		gpus := make([]sched.GPU, 4)
		for i := range gpus {
			gpus[i] = sched.GPU{Index: i, Model: "H100", MemoryMiB: 80 << 10, Free: i >= 2}
		}
		return sched.Snapshot{Now: now, Nodes: []sched.Node{{ID: "n1", Schedulable: true, GPUs: gpus}},
			Running: []sched.Running{{ID: "r", User: "bo", Placements: []sched.Placement{{NodeID: "n1", GPUs: []int{0, 1}}}, StartedAt: now, Estimate: time.Hour}},
			Queue:   []sched.Job{{ID: "j", User: "ana", GPUs: 4, Estimate: time.Hour, SubmittedAt: now}},
			Policy:  sched.Policy{Name: sched.PolicyFCFS, Backfill: true}}
	}
	v := &api.Job{ID: "j", GPUCount: 4, Nodes: 1, PendingReason: "resources", PendingMessage: "waits", EstimateBasis: "given"}
	tests := []struct {
		name      string
		gpus      int
		held      bool
		invalid   bool
		startsNow bool
		reason    string
	}{
		{"fewer GPUs start now", 2, false, false, true, ""},
		{"as many waits for the running job", 4, false, false, false, api.PendingReasonOf(sched.ReasonResources)},
		{"held: answered with its hold", 2, true, false, false, "resources"},
		{"none is out of range", 0, false, true, false, ""},
		{"more than the largest node is out of range", 5, false, true, false, ""},
	}
	for _, tc := range tests {
		w, err := WhatIf(snap(), v, tc.gpus, tc.held, now)
		var ae *api.Error
		if tc.invalid {
			if !errors.As(err, &ae) || ae.Field != "gpus" {
				t.Errorf("%s: err %v, want a 422 naming gpus", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if w.JobID != "j" || w.GPUs != tc.gpus || w.CurrentGPUs != 4 || w.Nodes != 1 || w.EstimateBasis != "given" || w.StartsNow != tc.startsNow || w.PendingReason != tc.reason {
			t.Errorf("%s: %+v, want starts now %v, reason %q", tc.name, w, tc.startsNow, tc.reason)
		}
		if tc.startsNow && (w.EstimatedStartTime == nil || !w.EstimatedStartTime.Equal(now)) {
			t.Errorf("%s: start %v, want now", tc.name, w.EstimatedStartTime)
		}
		if !tc.startsNow && !tc.held && (w.EstimatedStartTime == nil || !w.EstimatedStartTime.Equal(now.Add(time.Hour))) {
			t.Errorf("%s: start %v, want when the running job ends", tc.name, w.EstimatedStartTime)
		}
	}
}
