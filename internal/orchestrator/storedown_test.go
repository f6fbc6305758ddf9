package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestUnstorableOpRefusedAlone: a batch in which one op made a row the
// store can never write (a time past year 9999) and another a
// job whose times its nanosecond columns cannot hold: those two ops are
// answered with an error, the other ops of the batch are committed and
// acknowledged, and the loop goes on taking changes. Before, every try
// of the batch failed and the loop retried it for ever (503 for all).
func TestUnstorableOpRefusedAlone(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	far := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
	farEnd := far.Add(2 * time.Hour) // year 10000: no RFC 3339 text
	// Hold the loop in op 0 until the others are queued behind it, so
	// that they share one batch.
	release := make(chan struct{})
	held := make(chan struct{})
	go h.o.do(ctx, func(tx *txn) (any, error) { close(held); <-release; return nil, nil })
	<-held
	type result struct {
		v   any
		err error
	}
	fns := []func(tx *txn) (any, error){
		func(tx *txn) (any, error) { tx.batch.Settings = map[string]string{"door-a": "1"}; return "a", nil },
		func(tx *txn) (any, error) {
			tx.batch.Bookings = append(tx.batch.Bookings, api.Reservation{Name: "x3", GPUs: 1, Start: far, End: farEnd})
			return "bad booking", nil
		},
		func(tx *txn) (any, error) {
			tx.batch.Bookings = append(tx.batch.Bookings, api.Reservation{Name: "ok", GPUs: 1, Start: time.Now(), End: time.Now().Add(time.Hour)})
			return "b", nil
		},
		func(tx *txn) (any, error) {
			tx.touch(&api.Job{ID: "jbad", User: "u", Project: "p", State: api.StateQueued, SubmittedAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)})
			return "bad job", nil
		},
	}
	results := make([]chan result, len(fns))
	for i, fn := range fns {
		results[i] = make(chan result, 1)
		go func() {
			v, err := h.o.do(ctx, fn)
			results[i] <- result{v, err}
		}()
		for deadline := time.Now().Add(5 * time.Second); len(h.o.ops) < i+1; {
			if time.Now().After(deadline) {
				t.Fatalf("op %d was not queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(release)
	for i, want := range []string{"", "unstorable", "", "unstorable"} {
		var r result
		select {
		case r = <-results[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("op %d: no answer (the loop is wedged)", i)
		}
		var ae *api.Error
		switch {
		case want == "" && r.err != nil:
			t.Errorf("op %d: %v, want it acknowledged", i, r.err)
		case want != "" && (!errors.As(r.err, &ae) || ae.Code != want):
			t.Errorf("op %d: %v (%v), want %s", i, r.v, r.err, want)
		}
	}
	// The loop goes on, and the store holds the good rows only.
	j := h.submit(api.SubmitRequest{Command: "true", GPUCount: gpus(0)})
	st, err := h.o.cfg.Store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Settings["door-a"] != "1" {
		t.Errorf("op a's setting was not stored: %v", st.Settings)
	}
	names := map[string]bool{}
	for _, r := range st.Bookings {
		names[r.Name] = true
	}
	if !names["ok"] || names["x3"] {
		t.Errorf("bookings stored: %v, want ok only", names)
	}
	ids := map[string]bool{}
	for _, sj := range st.Jobs {
		ids[sj.ID] = true
	}
	if !ids[j.ID] || ids["jbad"] {
		t.Errorf("jobs stored: %v, want %s and not jbad", ids, j.ID)
	}
	if err := h.o.storeDownError(); err != nil {
		t.Errorf("the store is said down: %v", err)
	}
}
