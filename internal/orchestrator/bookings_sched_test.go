package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// startBooked runs an orchestrator on one 8-GPU node with a fake clock at
// 09:00 UTC and a booking "vis" of GPUs 0-3 from 10:00 to 18:00 for ana
// (project vision) with the given flags, put straight into the books.
func startBooked(t *testing.T, flags ...string) (*harness, *clock, *api.Reservation) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	h := startConfig(t, filepath.Join(t.TempDir(), "corral.db"), Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour,
		Now: clk.now, CancelGrace: 3 * time.Second})
	r := &api.Reservation{Name: "vis", GPUs: 4, Start: clk.now().Add(time.Hour), End: clk.now().Add(9 * time.Hour),
		Users: []string{"ana"}, Project: "vision", Flags: flags, Owner: "ana", State: "scheduled"}
	for g := range 4 {
		r.Allocation = append(r.Allocation, api.Allocation{NodeID: "n1", GPUID: g})
	}
	h.o.mu.Lock()
	h.o.bookings.Add(r)
	h.o.mu.Unlock()
	return h, clk, r
}

func gpuIDs(j api.Job) []int {
	var ids []int
	for _, a := range j.Allocation {
		ids = append(ids, a.GPUID)
	}
	slices.Sort(ids)
	return ids
}

// running reports the job started (it must be the next start) and
// returns it as running.
func (h *harness) running(id string) api.Job {
	h.t.Helper()
	if task := h.nextStart(); task.JobID != id {
		h.t.Fatalf("started %s, want %s", task.JobID, id)
	}
	h.o.Sink(exec.Update{JobID: id, Kind: exec.Started, At: h.o.cfg.Now()})
	return h.waitState(id, api.StateRunning)
}

// TestBookingAhead: an hour before the window, a long job is kept off the
// booked GPUs (and says why), while a short one runs on them.
func TestBookingAhead(t *testing.T) {
	h, _, _ := startBooked(t)
	long := h.submit(api.SubmitRequest{Command: "long", User: "bo", GPUCount: gpus(6), Class: api.ClassInteractive,
		EstimatedDuration: api.RawValue(`"3h"`)})
	h.noStart()
	j, _ := h.o.Job(long.ID)
	if j.PendingReason != "reservation" || j.PendingMessage != "GPUs 0-3 on n1 are booked by vision 10:00-18:00 UTC" {
		t.Fatalf("long job waits with %q: %q", j.PendingReason, j.PendingMessage)
	}
	short := h.submit(api.SubmitRequest{Command: "short", User: "bo", GPUCount: gpus(2), Class: api.ClassInteractive,
		TimeLimit: api.RawValue(`"30m"`)})
	if got := h.running(short.ID); !slices.Equal(gpuIDs(got), []int{0, 1}) {
		t.Fatalf("short job on GPUs %v, want the booked 0-1", gpuIDs(got))
	}
}

// TestBookingWindow: in the window the booking's user's job runs on its
// GPUs, and nobody else's job does; submissions naming a booking are
// checked.
func TestBookingWindow(t *testing.T) {
	h, clk, r := startBooked(t)
	clk.add(90 * time.Minute)
	ctx := context.Background()
	for name, req := range map[string]api.SubmitRequest{
		"unknown booking": {Command: "x", User: "ana", GPUCount: gpus(1), Reservation: "nope"},
		"not its user":    {Command: "x", User: "bo", GPUCount: gpus(1), Reservation: "vis"},
	} {
		_, _, err := h.o.Submit(ctx, req, "")
		if !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != "reservation" {
			t.Fatalf("%s: %v, want 422 on reservation", name, err)
		}
	}
	big := h.submit(api.SubmitRequest{Command: "big", User: "bo", GPUCount: gpus(6)})
	h.noStart()
	if j, _ := h.o.Job(big.ID); j.PendingReason != "reservation" {
		t.Fatalf("bo's 6-GPU job waits with %q: %s", j.PendingReason, j.PendingMessage)
	}
	ana := h.submit(api.SubmitRequest{Command: "ana", User: "ana", GPUCount: gpus(4), Reservation: "vis"})
	got := h.running(ana.ID)
	if !slices.Equal(gpuIDs(got), []int{0, 1, 2, 3}) || got.Reservation != "vis" {
		t.Fatalf("ana's job on %v in %q, want the booked GPUs in vis", gpuIDs(got), got.Reservation)
	}
	h.o.mu.RLock()
	used := r.UsedAt
	h.o.mu.RUnlock()
	if used == nil || !used.Equal(clk.now()) {
		t.Fatalf("booking used_at = %v, want %v", used, clk.now())
	}
	// The 6-GPU job holds GPUs 4-7 for when the booking ends: a job sure
	// to end by then backfills on them.
	bo := h.submit(api.SubmitRequest{Command: "bo", User: "bo", GPUCount: gpus(4), EstimatedDuration: api.RawValue(`"1h"`)})
	if got := h.running(bo.ID); !slices.Equal(gpuIDs(got), []int{4, 5, 6, 7}) || got.Reservation != "" {
		t.Fatalf("bo's job on %v in %q, want the unbooked GPUs", gpuIDs(got), got.Reservation)
	}
}

// TestBookingMagnetic: under magnetic, the booked user's plain job lands
// in the booking.
func TestBookingMagnetic(t *testing.T) {
	h, clk, _ := startBooked(t, api.BookingMagnetic)
	clk.add(90 * time.Minute)
	j := h.submit(api.SubmitRequest{Command: "ana", User: "ana", GPUCount: gpus(2)})
	if got := h.running(j.ID); !slices.Equal(gpuIDs(got), []int{0, 1}) || got.Reservation != "" {
		t.Fatalf("ana's plain job on %v naming %q, want it on the booked GPUs naming none", gpuIDs(got), got.Reservation)
	}
	if r, err := h.o.FeatureOps().Bookings.Get("vis"); err != nil || r.UsedAt == nil {
		t.Fatal("the magnetic booking's used_at is not set")
	}
	// At the window's end it is stopped as a job of the booking.
	clk.add(8 * time.Hour)
	h.waitCycle()
	select {
	case s := <-h.ex.stops:
		if s.jobID != j.ID {
			t.Fatalf("stop %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the magnetic job was not stopped at its booking's end")
	}
}

// TestBookingEnd: at the window's end, a job in it gets the time-limit
// treatment and ends reservation_ended, unless the booking is flex.
func TestBookingEnd(t *testing.T) {
	for _, flex := range []bool{false, true} {
		t.Run(map[bool]string{false: "not flex", true: "flex"}[flex], func(t *testing.T) {
			var flags []string
			if flex {
				flags = []string{api.BookingFlex}
			}
			h, clk, _ := startBooked(t, flags...)
			clk.add(90 * time.Minute)
			j := h.submit(api.SubmitRequest{Command: "ana", User: "ana", GPUCount: gpus(4), Reservation: "vis"})
			h.running(j.ID)
			clk.add(8 * time.Hour) // 18:30
			h.waitCycle()
			if flex {
				select {
				case s := <-h.ex.stops:
					t.Fatalf("flex: stopped %+v", s)
				default:
				}
				return
			}
			select {
			case s := <-h.ex.stops:
				if s.jobID != j.ID || s.grace != 3*time.Second {
					t.Fatalf("stop %+v, want the job with the cancel grace", s)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the job was not stopped at its booking's end")
			}
			h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: clk.now(), ExitCode: 143, Signal: "terminated"})
			got := h.waitState(j.ID, api.StateFailed)
			if got.Reason != api.ReasonReservationEnded || !strings.Contains(got.Message, "booking vis ended") {
				t.Fatalf("ended %q: %s", got.Reason, got.Message)
			}
		})
	}
}

// TestBookingNotice: preemptible work that runs into a booking starts
// (nothing else fits), and is told to stop at the window's start minus
// its grace, not before.
func TestBookingNotice(t *testing.T) {
	h, clk, _ := startBooked(t)
	j := h.submit(api.SubmitRequest{Command: "batch", User: "bo", GPUCount: gpus(8), EstimatedDuration: api.RawValue(`"3h"`), Class: api.ClassPreemptible,
		PreemptGrace: api.RawValue(`"5m"`)})
	h.running(j.ID)
	clk.add(54 * time.Minute)
	h.waitCycle()
	select {
	case s := <-h.ex.stops:
		t.Fatalf("stopped at 09:54: %+v", s)
	default:
	}
	clk.add(time.Minute) // 09:55: the booking's start minus 5m
	h.waitCycle()
	select {
	case s := <-h.ex.stops:
		if s.jobID != j.ID || s.grace != 5*time.Minute {
			t.Fatalf("stop %+v, want the job with its 5m grace", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notice at the booking's start minus grace")
	}
	h.ex.mu.Lock()
	notices := slices.Clone(h.ex.notices)
	h.ex.mu.Unlock()
	if len(notices) != 1 || !strings.Contains(notices[0], "GPUs 0-3 on n1 are booked by vision 10:00-18:00 UTC") {
		t.Fatalf("notices %q", notices)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: clk.now(), ExitCode: 143, Signal: "terminated"})
	if got := h.waitState(j.ID, api.StateQueued); got.Reason != api.ReasonPreempted {
		t.Fatalf("requeued with %q", got.Reason)
	}
}

// TestBookingHold: an immediate hold (POST /cluster/gpu-allocate) is kept
// off booked GPUs as a job is: in the window, and ahead of it when the
// hold would last into it.
func TestBookingHold(t *testing.T) {
	h, clk, _ := startBooked(t)
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "long", GPUCount: 6, Duration: api.RawValue(`"2h"`)}, "bo"); api.AsError(err) == nil || api.AsError(err).Status != 409 {
		t.Fatalf("a 2h hold of 6 GPUs an hour before the booking: %v, want 409", err)
	}
	short, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "short", GPUCount: 6, Duration: api.RawValue(`"30m"`)}, "bo")
	if err != nil {
		t.Fatalf("a 30m hold of 6 GPUs: %v", err)
	}
	if _, err := h.o.FeatureOps().Holds.Release(ctx, short.JobID); err != nil {
		t.Fatal(err)
	}
	clk.add(90 * time.Minute)
	held, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "in", GPUCount: 4, Duration: api.RawValue(`"30m"`)}, "bo")
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuIDs(api.Job{Allocation: held.Allocation}); !slices.Equal(got, []int{4, 5, 6, 7}) {
		t.Fatalf("hold in the window on GPUs %v, want the unbooked 4-7", got)
	}
}
