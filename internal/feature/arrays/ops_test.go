package arrays

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/featuretest"
	"github.com/corral-sched/corral/internal/store"
)

// doneStore holds done arrays' records.
type doneStore map[string]store.ArrayRecord

func (s doneStore) Array(_ context.Context, id string) (store.ArrayRecord, error) {
	rec, ok := s[id]
	if !ok {
		return store.ArrayRecord{}, store.ErrNoArray
	}
	return rec, nil
}

// exact resolves only whole ids: live when b holds them, else known when
// the store does.
type exact struct {
	b  *Books
	st doneStore
}

func (r exact) Array(id string) (string, bool, bool, error) {
	_, done := r.st[id]
	return id, r.b.Has(id), r.b.Has(id) || done, nil
}

// opsOver returns the operations over a live array "jlive" of tasks 0-2
// (task 1 running) and a done array "jdone" with throttle 1.
func opsOver(t *testing.T) (Ops, *featuretest.Loop, []*api.Job) {
	t.Helper()
	f := &fakeJobs{}
	b := New(f, Config{})
	_, tasks := submit(b, f, "jlive", "0-2")
	tx := &fakeTx{now: t0}
	move(b, tx, tasks[1], api.StateRunning)
	st := doneStore{"jdone": {Array: api.Array{ID: "jdone", User: "bo", Project: "p", Throttle: 1, Tasks: []int{0}}}}
	l := &featuretest.Loop{Now: t0}
	return Ops{Books: b, Loop: l, Refs: exact{b, st}, Store: st, Grace: 7 * time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, l, tasks
}

func TestOpsCancel(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		id       string
		status   int // the error's; 0: none
		moves    int // tasks canceled while queued
		stops    int // tasks asked to stop
		stopping bool
	}{
		{"jlive", 0, 2, 1, true},
		{"jdone", 409, 0, 0, false},
		{"jnone", 404, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			o, l, tasks := opsOver(t)
			_, stopping, err := o.Cancel(ctx, c.id, 0)
			var ae *api.Error
			if c.status == 0 && err != nil || c.status != 0 && (!errors.As(err, &ae) || ae.Status != c.status) {
				t.Fatalf("error %v, want status %d", err, c.status)
			}
			if len(l.Moves) != c.moves || len(l.Stops) != c.stops || stopping != c.stopping {
				t.Fatalf("moves %+v stops %+v stopping %v", l.Moves, l.Stops, stopping)
			}
			if c.stops > 0 && (l.Stops[0].JobID != tasks[1].ID || l.Stops[0].Grace != 7*time.Second || !tasks[1].CancelRequested) {
				t.Fatalf("stop %+v of %+v: want task 1 with the default grace", l.Stops[0], tasks[1])
			}
			for _, m := range l.Moves {
				if m.To != api.StateCanceled || m.Reason != api.ReasonCanceled {
					t.Fatalf("move %+v", m)
				}
			}
		})
	}
}

func TestOpsThrottle(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		id      string
		n       int
		status  int
		dos     int
		replans int
		rows    int // array records in the batch
	}{
		{"jlive", 1, 0, 1, 1, 1},
		{"jlive", -1, 422, 0, 0, 0},
		{"jdone", 3, 0, 1, 0, 1},
		{"jdone", 1, 0, 1, 0, 0}, // unchanged: nothing written
		{"jnone", 1, 404, 1, 0, 0},
	}
	for _, c := range cases {
		o, l, _ := opsOver(t)
		a, err := o.SetThrottle(ctx, c.id, c.n)
		var ae *api.Error
		if c.status == 0 && err != nil || c.status != 0 && (!errors.As(err, &ae) || ae.Status != c.status) {
			t.Fatalf("%s %d: error %v, want status %d", c.id, c.n, err, c.status)
		}
		if l.Dos != c.dos || l.Replans != c.replans {
			t.Fatalf("%s %d: dos %d replans %d", c.id, c.n, l.Dos, l.Replans)
		}
		rows := 0
		for _, tx := range l.Txs {
			rows += len(tx.B.Arrays)
		}
		if rows != c.rows {
			t.Fatalf("%s %d: %d array rows, want %d", c.id, c.n, rows, c.rows)
		}
		if err == nil && a.ID != c.id {
			t.Fatalf("%s %d: answered %+v", c.id, c.n, a)
		}
	}
}

func TestOpsReadsDoneArraysFromTheStore(t *testing.T) {
	o, l, _ := opsOver(t)
	if user, project, ok := o.Owner("jdone"); !ok || user != "bo" || project != "p" {
		t.Fatalf("owner %q %q %v", user, project, ok)
	}
	if user, _, ok := o.Owner("jlive"); !ok || user != "ana" {
		t.Fatalf("owner of the live array %q %v", user, ok)
	}
	s := o.Summaries([]string{"jdone", "jnone", "jlive"})
	if len(s) != 2 || s[0].ID != "jdone" || s[1].ID != "jlive" || s[0].Tasks != nil || s[1].Tasks != nil {
		t.Fatalf("summaries %+v", s)
	}
	if len(l.BeforeReads) != 3 { // Owner("jdone"), and jdone and jnone in Summaries
		t.Fatalf("store reads %v", l.BeforeReads)
	}
}
