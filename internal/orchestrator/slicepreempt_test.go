package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/agent/gpu"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestSlicePreemptionFlow: with preemption on, a high-priority slice job
// preempts a low-priority one holding a slice of its profile; the victim
// is stopped and requeued, and the high job starts on the very slice it
// freed, while the other slice job runs on.
func TestSlicePreemptionFlow(t *testing.T) {
	ctx := context.Background()
	n := simNode("n1", 1)
	ms, err := gpu.SimMIGLayout("0:3g.40gb*2", 1, 80*1024)
	if err != nil {
		t.Fatal(err)
	}
	n.Devices[0].MIG = ms[0]
	h := startConfig(t, "", Config{Nodes: []Node{n}})
	if _, err := h.o.SetPolicies(ctx, api.PoliciesUpdate{Policy: ptr("priority"), Preemption: ptr(true), MinRunTime: api.RawValue(`0`)}); err != nil {
		t.Fatal(err)
	}
	slice := api.GPUPart{MIGProfile: "3g.40gb"}
	var lows []exec.Task
	for _, prio := range []string{`"normal"`, `"low"`} {
		j := h.submit(api.SubmitRequest{Command: "sleep", User: "ana", GPUCount: gpus(1), Priority: api.RawValue(prio), GPUPart: slice})
		task := h.nextStart()
		h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: time.Now()})
		h.waitState(j.ID, api.StateRunning)
		lows = append(lows, task)
	}
	normal, low := lows[0], lows[1]
	high := h.submit(api.SubmitRequest{Command: "sleep", User: "bob", GPUCount: gpus(1), Priority: api.RawValue(`"high"`), GPUPart: slice})
	if stop := <-h.ex.stops; stop.jobID != low.JobID {
		t.Fatalf("stopped %s, want the low slice job %s", stop.jobID, low.JobID)
	}
	if j, _ := h.o.Job(high.ID); j.PendingReason != "preempting" {
		t.Fatalf("high job waits with %q: %s", j.PendingReason, j.PendingMessage)
	}
	h.o.Sink(exec.Update{JobID: low.JobID, Kind: exec.Exited, At: time.Now(), ExitCode: 143, Signal: "terminated"})
	task := h.nextStart()
	if task.JobID != high.ID || len(task.MIGDevices) != 1 || len(low.MIGDevices) != 1 || task.MIGDevices[0] != low.MIGDevices[0] {
		t.Fatalf("started %s on %v, want the high job on the freed slice %v", task.JobID, task.MIGDevices, low.MIGDevices)
	}
	if j := h.waitState(low.JobID, api.StateQueued); j.Preemptions != 1 || len(j.Allocation) != 0 {
		t.Fatalf("requeued victim = %+v", j)
	}
	if j, _ := h.o.Job(normal.JobID); j.State != api.StateRunning || j.Preempting {
		t.Fatalf("the normal slice job = %s (preempting %v)", j.State, j.Preempting)
	}
}
