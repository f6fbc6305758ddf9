package limits

import (
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
)

// fakeRunning records what the time limits ask of the loop and tell the
// notifications.
type fakeRunning struct {
	jobs     []*api.Job
	touched  []string
	stops    []string
	warnings []string
	notes    []string
	armed    []time.Time
}

func (r *fakeRunning) Active() iter.Seq[*api.Job]     { return slices.Values(r.jobs) }
func (r *fakeRunning) Touch(_ feature.Tx, j *api.Job) { r.touched = append(r.touched, j.ID) }
func (r *fakeRunning) Stop(_ feature.Tx, j *api.Job, grace time.Duration, notice, _ string) {
	r.stops = append(r.stops, fmt.Sprintf("%s %s %q", j.ID, grace, notice))
}
func (r *fakeRunning) TimeWarning(j *api.Job, _ time.Time) { r.warnings = append(r.warnings, j.ID) }
func (r *fakeRunning) Job(j *api.Job, k notify.Kind, _ time.Time) {
	r.notes = append(r.notes, j.ID+" "+string(k))
}

// TestTimeLimitsCheck: a running attempt past its limit is marked timed
// out, its row written, its owner told and its stop asked with the cancel
// grace; one under its limit arms the loop's wake-up at its limit; jobs
// without a limit, not running, or already ending are left alone.
func TestTimeLimitsCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	hour := api.Seconds(3600)
	job := func(id string, started time.Duration, edit func(*api.Job)) *api.Job {
		s := t0.Add(-started)
		j := &api.Job{ID: id, State: api.StateRunning, StartedAt: &s, TimeLimit: &hour}
		if edit != nil {
			edit(j)
		}
		return j
	}
	over := job("over", 2*time.Hour, nil)
	r := &fakeRunning{jobs: []*api.Job{
		over,
		job("under", 10*time.Minute, nil),
		job("nolimit", 2*time.Hour, func(j *api.Job) { j.TimeLimit = nil }),
		job("ending", 2*time.Hour, func(j *api.Job) { j.CancelRequested = true }),
		job("allocating", 2*time.Hour, func(j *api.Job) { j.State = api.StateAllocating }),
	}}
	tl := TimeLimits{Running: r, Notes: r, Grace: 10 * time.Second, Log: slog.New(slog.DiscardHandler),
		Arm: func(due, _ time.Time) { r.armed = append(r.armed, due) }}
	tl.Check(&featuretest.Tx{}, t0)
	if !over.TimedOut || fmt.Sprint(r.touched) != "[over]" || fmt.Sprint(r.stops) != `[over 10s ""]` {
		t.Errorf("over its limit: timed out %v, touched %v, stops %v", over.TimedOut, r.touched, r.stops)
	}
	if fmt.Sprint(r.notes) != "[over job.time_limit]" || fmt.Sprint(r.warnings) != "[over under]" {
		t.Errorf("notes %v, warnings %v", r.notes, r.warnings)
	}
	if len(r.armed) != 1 || !r.armed[0].Equal(t0.Add(50*time.Minute)) {
		t.Errorf("armed %v, want the under job's limit at +50m", r.armed)
	}
}

// TestTimerTicksOverTheRunningWork: the timer checks the running work the
// loop hands it at its own clock, and asks for the tick's commit.
func TestTimerTicksOverTheRunningWork(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	hour := api.Seconds(3600)
	started := t0.Add(-2 * time.Hour)
	over := &api.Job{ID: "over", State: api.StateRunning, StartedAt: &started, TimeLimit: &hour}
	r := &fakeRunning{jobs: []*api.Job{over}}
	tm := Timer{Notes: r, Grace: 3 * time.Second, Arm: func(time.Time, time.Time) {}, Now: func() time.Time { return t0 },
		Log: slog.New(slog.DiscardHandler)}
	if !tm.TickRunning(&featuretest.Tx{}, r) || tm.TickName() != "time limits" {
		t.Fatal("the tick does not ask for its commit")
	}
	if fmt.Sprint(r.stops) != `[over 3s ""]` || !over.TimedOut {
		t.Fatalf("stops %v, timed out %v", r.stops, over.TimedOut)
	}
	r.jobs = nil
	if !tm.TickRunning(&featuretest.Tx{}, r) || len(r.stops) != 1 {
		t.Fatalf("a tick with nothing running: stops %v", r.stops)
	}
}
