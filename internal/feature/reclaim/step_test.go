package reclaim

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

// fakeLoop is the running work and what Step asks of the loop, recorded.
type fakeLoop struct {
	jobs    []*api.Job
	util    int
	touched []string
	stops   []string // "id grace notice?"
	notes   []string
}

func (l *fakeLoop) Active() iter.Seq[*api.Job] { return slices.Values(l.jobs) }
func (l *fakeLoop) Touch(_ feature.Tx, j *api.Job) {
	l.touched = append(l.touched, j.ID)
}
func (l *fakeLoop) Stop(_ feature.Tx, j *api.Job, grace time.Duration, notice, _ string) {
	l.stops = append(l.stops, fmt.Sprintf("%s %s %v", j.ID, grace, notice != ""))
}
func (l *fakeLoop) Class(string) api.ClassIdle {
	return api.ClassIdle{IdleThreshold: 5, IdleWindow: api.Seconds(3600), IdleWarn: api.Seconds(600)}
}
func (l *fakeLoop) PreemptGrace() time.Duration { return 30 * time.Second }
func (l *fakeLoop) Util(string, int) (int, bool, bool) {
	return l.util, true, true
}
func (l *fakeLoop) Job(j *api.Job, k notify.Kind, _ time.Time) {
	l.notes = append(l.notes, j.ID+" "+string(k))
}

// TestStep: a quiet interactive job is warned (its row written, its
// owner told) before its window ends, then stopped with a notice and the
// preemption's grace; use clears the warning; a batch job is left alone.
func TestStep(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	job := func(id, class string) *api.Job {
		return &api.Job{ID: id, Class: class, State: api.StateRunning, StartedAt: &t0, Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}}}
	}
	ia, batch := job("ia", api.ClassInteractive), job("b", "")
	l := &fakeLoop{jobs: []*api.Job{ia, batch}}
	b := New(0, nil)
	log := slog.New(slog.DiscardHandler)
	step := func(at time.Duration) {
		now := t0.Add(at)
		b.Step(&featuretest.Tx{At: now}, now, l, l, log)
	}
	step(0)
	step(55 * time.Minute)
	if ia.IdleEndsAt == nil || !ia.IdleEndsAt.Equal(t0.Add(time.Hour)) || fmt.Sprint(l.touched, l.notes) != "[ia] [ia job.idle_warning]" {
		t.Fatalf("after 55 min: ends %v, touched %v, notes %v", ia.IdleEndsAt, l.touched, l.notes)
	}
	l.util = 90
	step(56 * time.Minute)
	if ia.IdleEndsAt != nil {
		t.Fatalf("in use again: still warned, ending %v", ia.IdleEndsAt)
	}
	l.util = 0
	step(57 * time.Minute) // quiet again: its window starts over
	step(116 * time.Minute)
	if len(l.stops) != 0 {
		t.Fatalf("stopped before its window from the use: %v", l.stops)
	}
	step(117 * time.Minute)
	if fmt.Sprint(l.stops) != "[ia 30s true]" || !ia.IdleReclaimed || !ia.CancelRequested {
		t.Fatalf("stops %v, reclaimed %v", l.stops, ia.IdleReclaimed)
	}
	if batch.IdleEndsAt != nil || slices.Contains(l.touched, "b") {
		t.Fatal("the batch job was touched")
	}
}

// TestTickStepsAtItsClock: the tick steps over the running work the loop
// hands it, with the books' classes, at its own clock, and asks for the
// tick's commit.
func TestTickStepsAtItsClock(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	ia := &api.Job{ID: "ia", Class: api.ClassInteractive, State: api.StateRunning, StartedAt: &t0, Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}}}
	l := &fakeLoop{jobs: []*api.Job{ia}}
	now := t0
	tk := Tick{Books: New(0, nil), Cluster: l, Notes: l, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)}
	for _, at := range []time.Duration{0, 55 * time.Minute} {
		now = t0.Add(at)
		if !tk.TickRunning(&featuretest.Tx{At: now}, l) {
			t.Fatal("the tick does not ask for its commit")
		}
	}
	if ia.IdleEndsAt == nil || fmt.Sprint(l.notes) != "[ia job.idle_warning]" || tk.TickName() != "idle reclaim" {
		t.Fatalf("after 55 quiet minutes: ends %v, notes %v", ia.IdleEndsAt, l.notes)
	}
}
