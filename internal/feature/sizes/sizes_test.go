package sizes

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// A submission past a per-job limit is a 422 naming its field; one that
// takes its user's live bytes past the limit is a 429 unless exempt;
// bytes come back when a job ends, not when it is requeued (it is still
// live).
func TestBooks(t *testing.T) {
	type step struct {
		submit *api.Job // check it, and on success queue it
		exempt bool
		move   *api.Event // move the last job queued
		status int        // of the check: 0 accepted
		field  string
		live   int64 // the user's live bytes after the step
	}
	job := func(cmd string, env map[string]string) *api.Job {
		return &api.Job{User: "ana", Command: cmd, Env: env}
	}
	ev := func(from, to api.State) *api.Event { return &api.Event{From: from, To: to} }
	cases := map[string][]step{
		"command": {
			{submit: job(strings.Repeat("c", 100), nil), live: 103},
			{submit: job(strings.Repeat("c", 101), nil), status: 422, field: "command", live: 103},
		},
		"env": {
			{submit: job("c", map[string]string{"X": strings.Repeat("e", 999)}), exempt: true, live: 1004},
			{submit: job("c", map[string]string{"X": strings.Repeat("e", 1000)}), exempt: true, status: 422, field: "env", live: 1004},
		},
		"per user, ended gives back": {
			{submit: job(strings.Repeat("a", 97), nil), live: 100},
			{submit: job(strings.Repeat("b", 97), nil), live: 200},
			{submit: job(strings.Repeat("c", 97), nil), live: 300},
			{submit: job("d", nil), status: 429, live: 300},
			{submit: job("d", nil), exempt: true, live: 304},
			{move: ev(api.StateQueued, api.StateRunning), live: 304},
			{move: ev(api.StateRunning, api.StateQueued), live: 304},
			{move: ev(api.StateQueued, api.StateCanceled), live: 300},
			{submit: job("d", nil), status: 429, live: 300},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			b := New(Limits{MaxCommandBytes: 100, MaxEnvBytes: 1000, MaxUserQueuedBytes: 300})
			var last *api.Job
			for i, s := range steps {
				if s.submit != nil {
					err := b.CheckSubmit(&feature.Submission{Job: s.submit, Exempt: s.exempt})
					var ae *api.Error
					switch {
					case s.status == 0 && err != nil:
						t.Fatalf("step %d: %v", i, err)
					case s.status != 0 && (!errors.As(err, &ae) || ae.Status != s.status || ae.Field != s.field):
						t.Fatalf("step %d: err %v; want %d naming %q", i, err, s.status, s.field)
					case err == nil:
						last = s.submit
						b.Moved(nil, last, api.Event{To: api.StateQueued})
					}
				}
				if s.move != nil {
					b.Moved(nil, last, *s.move)
				}
				if got := b.Live("ana"); got != s.live {
					t.Fatalf("step %d: live %d; want %d", i, got, s.live)
				}
			}
		})
	}
}

// An array's tasks are counted by their array (Add), not one by one; the
// defaults apply to a zero limit and none to a negative one.
func TestArraysAndDefaults(t *testing.T) {
	b := New(Limits{MaxUserQueuedBytes: -1})
	task := &api.Job{User: "bo", Command: "x", ArrayJobID: "j1"}
	b.Moved(nil, task, api.Event{To: api.StateQueued})
	if b.Live("bo") != 0 {
		t.Fatalf("a task counted on its own: %d", b.Live("bo"))
	}
	b.Add("bo", JobBytes(task))
	b.Add("bo", -JobBytes(task))
	if b.Live("bo") != 0 {
		t.Fatalf("live %d after the array left", b.Live("bo"))
	}
	big := &api.Job{User: "bo", Command: strings.Repeat("c", DefaultMaxCommandBytes+1)}
	var ae *api.Error
	if err := b.CheckSubmit(&feature.Submission{Job: big}); !errors.As(err, &ae) || ae.Field != "command" {
		t.Fatalf("default command limit: %v", err)
	}
	ok := &api.Job{User: "bo", Command: strings.Repeat("c", DefaultMaxCommandBytes)}
	if err := b.CheckSubmit(&feature.Submission{Job: ok}); err != nil {
		t.Fatalf("at the default limit, no per-user limit: %v", err)
	}
}
