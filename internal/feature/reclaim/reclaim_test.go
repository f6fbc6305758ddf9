package reclaim

import (
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// fakeAttach is an attach registry of fixed answers.
type fakeAttach struct {
	n         map[string]int
	last      map[string]time.Time
	forgotten []string
}

func (f *fakeAttach) Attached(id string) (int, time.Time) { return f.n[id], f.last[id] }
func (f *fakeAttach) Forget(id string)                    { f.forgotten = append(f.forgotten, id) }

// A running interactive job whose GPUs are quiet and to which nothing is
// attached is warned idle_warn before its idle_window ends and reclaimed
// at its end; use clears it; a connection, a busy GPU, a hold's work or a
// batch job is never idle.
func TestLook(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	c := api.ClassIdle{IdleThreshold: 5, IdleWindow: api.Seconds(3600), IdleWarn: api.Seconds(600)}
	util := map[int]int{0: 2, 1: 3}
	read := func(node string, gpu int) (int, bool, bool) {
		if node != "n1" {
			return 0, false, false
		}
		u, ok := util[gpu]
		return u, true, ok
	}
	job := func() *api.Job {
		return &api.Job{ID: "j", Class: api.ClassInteractive, State: api.StateRunning, StartedAt: &t0,
			Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}}}
	}
	type look struct {
		at   time.Duration
		want Verdict
		ends time.Duration // from t0, where want is Warn or Reclaim
	}
	for name, c2 := range map[string]struct {
		edit  func(j *api.Job, a *fakeAttach)
		looks []look
	}{
		"quiet from the start": {looks: []look{{0, Idle, 0}, {49 * time.Minute, Idle, 0}, {50 * time.Minute, Warn, time.Hour}, {time.Hour, Reclaim, time.Hour}}},
		"a connection":         {edit: func(_ *api.Job, a *fakeAttach) { a.n["j"] = 1 }, looks: []look{{0, InUse, 0}, {2 * time.Hour, InUse, 0}}},
		"closed late": {edit: func(_ *api.Job, a *fakeAttach) { a.last["j"] = t0.Add(30 * time.Minute) },
			looks: []look{{0, Idle, 0}, {time.Hour, Idle, 0}, {80 * time.Minute, Warn, 90 * time.Minute}, {90 * time.Minute, Reclaim, 90 * time.Minute}}},
		"a hold's job": {edit: func(j *api.Job, _ *fakeAttach) { j.Hold = "h" }, looks: []look{{2 * time.Hour, Skip, 0}}},
		"batch":        {edit: func(j *api.Job, _ *fakeAttach) { j.Class = "" }, looks: []look{{2 * time.Hour, Skip, 0}}},
		"ending":       {edit: func(j *api.Job, _ *fakeAttach) { j.CancelRequested = true }, looks: []look{{2 * time.Hour, Skip, 0}}},
		"unknown node": {edit: func(j *api.Job, _ *fakeAttach) { j.Allocation[0].NodeID = "n9" }, looks: []look{{2 * time.Hour, InUse, 0}}},
		"no reading":   {edit: func(j *api.Job, _ *fakeAttach) { j.Allocation[1].GPUID = 7 }, looks: []look{{2 * time.Hour, InUse, 0}}},
		"busy GPU":     {edit: func(j *api.Job, _ *fakeAttach) { j.Allocation[1].GPUID = 5 }, looks: []look{{0, InUse, 0}}},
	} {
		t.Run(name, func(t *testing.T) {
			util[5] = 80
			a := &fakeAttach{n: map[string]int{}, last: map[string]time.Time{}}
			b := New(0, a)
			j := job()
			if c2.edit != nil {
				c2.edit(j, a)
			}
			for _, l := range c2.looks {
				v, ends := b.Look(j, c, t0.Add(l.at), read)
				if v != l.want || ((v == Warn || v == Reclaim) && !ends.Equal(t0.Add(l.ends))) {
					t.Fatalf("at +%v: %v, ends %v; want %v, ends +%v", l.at, v, ends, l.want, l.ends)
				}
				if v == Warn {
					j.IdleEndsAt = &ends
				}
			}
		})
	}
}

// The interactive classes get idle settings by default, shorter under a
// short maximum; updates are checked field by field; settings that could
// never act before a job's end are refused; an ended job's connections
// are forgotten.
func TestClassesAndForget(t *testing.T) {
	var p api.Policies
	b := New(40*time.Minute, nil)
	b.Defaults(&p)
	if c := p.Classes[api.ClassInteractive]; c.IdleWindow.Duration() != 20*time.Minute || c.IdleWarn.Duration() != 10*time.Minute || c.IdleThreshold != defaultIdleThreshold {
		t.Fatalf("defaults under a 40m maximum: %+v", c)
	}
	raw := func(s string) api.RawValue { return api.RawValue(`"` + s + `"`) }
	pct := func(n int) *int { return &n }
	for name, c := range map[string]struct {
		u     map[string]api.ClassIdleUpdate
		field string // of the refusal; "" accepted
	}{
		"threshold":       {u: map[string]api.ClassIdleUpdate{api.ClassInteractive: {IdleThreshold: pct(10)}}},
		"batch class":     {u: map[string]api.ClassIdleUpdate{"batch": {IdleThreshold: pct(10)}}, field: "classes"},
		"threshold > 100": {u: map[string]api.ClassIdleUpdate{api.ClassInteractive: {IdleThreshold: pct(101)}}, field: "classes.interactive.idle_threshold"},
		"window too long": {u: map[string]api.ClassIdleUpdate{api.ClassInteractive: {IdleWindow: raw("200h")}}, field: "classes.interactive.idle_window"},
		"bad warn":        {u: map[string]api.ClassIdleUpdate{api.ClassInteractivePreemptible: {IdleWarn: raw("soon")}}, field: "classes.interactive-preemptible.idle_warn"},
		"past the max":    {u: map[string]api.ClassIdleUpdate{api.ClassInteractive: {IdleWindow: raw("40m")}}, field: "classes.interactive.idle_window"},
		"warn past window": {u: map[string]api.ClassIdleUpdate{api.ClassInteractive: {IdleWindow: raw("15m"), IdleWarn: raw("15m")}},
			field: "classes.interactive.idle_warn"},
	} {
		t.Run(name, func(t *testing.T) {
			before := p.Classes[api.ClassInteractive]
			q := p
			err := Apply(&q, c.u)
			if err == nil {
				err = b.Check(q)
			}
			var ae *api.Error
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.field != "" && (!errors.As(err, &ae) || ae.Field != c.field):
				t.Fatalf("err %v; want one naming %s", err, c.field)
			case p.Classes[api.ClassInteractive] != before:
				t.Fatal("an update changed the policies it was applied to a copy of")
			}
		})
	}
	a := &fakeAttach{}
	b = New(0, a)
	b.Moved(nil, &api.Job{ID: "x"}, api.Event{To: api.StateRunning})
	b.Moved(nil, &api.Job{ID: "x"}, api.Event{To: api.StateCanceled})
	if len(a.forgotten) != 1 || a.forgotten[0] != "x" {
		t.Fatalf("forgotten %v; want x once, when it ended", a.forgotten)
	}
}
