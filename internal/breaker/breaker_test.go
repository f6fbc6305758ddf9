package breaker

import (
	"errors"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("connection refused")
	b := New(Config{Threshold: 2, Reset: time.Second, MaxReset: 3 * time.Second})
	step := func(what string, want State) {
		t.Helper()
		if got := b.Snapshot().State; got != want {
			t.Fatalf("%s: state %s, want %s", what, got, want)
		}
	}
	step("new", Closed)
	if err := b.Allow(t0); err != nil {
		t.Fatal(err)
	}
	b.Failure(t0, boom)
	step("one failure under the threshold", Closed)
	b.Failure(t0, boom)
	step("threshold reached", Open)
	if err := b.Allow(t0.Add(999 * time.Millisecond)); !errors.Is(err, ErrOpen) {
		t.Fatalf("open before its reset: %v, want ErrOpen", err)
	}
	if err := b.Allow(t0.Add(time.Second)); err != nil {
		t.Fatalf("the probe after the reset: %v", err)
	}
	step("probe out", HalfOpen)
	if err := b.Allow(t0.Add(time.Second)); !errors.Is(err, ErrOpen) {
		t.Fatalf("a second call while the probe is out: %v, want ErrOpen", err)
	}
	// A failed probe doubles the wait: 2s, then 3s (the cap), then 3s.
	at := t0.Add(time.Second)
	for _, wait := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		b.Failure(at, boom)
		step("failed probe", Open)
		if got := b.Snapshot().RetryAt.Sub(at); got != wait {
			t.Fatalf("retry in %s, want %s", got, wait)
		}
		if err := b.Allow(at.Add(wait - time.Millisecond)); !errors.Is(err, ErrOpen) {
			t.Fatalf("allowed before the backoff ended")
		}
		at = at.Add(wait)
		if err := b.Allow(at); err != nil {
			t.Fatalf("no probe after the backoff: %v", err)
		}
	}
	b.Success(at)
	step("probe succeeded", Closed)
	if s := b.Snapshot(); s.Failures != 0 || s.LastErr != "" {
		t.Fatalf("after success: %+v", s)
	}
	// The backoff started over: the next opening waits Reset again.
	b.Failure(at, boom)
	b.Failure(at, boom)
	if got := b.Snapshot().RetryAt.Sub(at); got != time.Second {
		t.Fatalf("after a success the wait is %s, want the reset of 1s", got)
	}
}

// Do reports f's outcome as failed classifies it, and refuses f while
// the breaker is open.
func TestDo(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	b := New(Config{Threshold: 1, Reset: time.Minute})
	boom := errors.New("unreachable")
	failed := func(err error) bool { return err == boom }
	if err := b.Do(clock, failed, func() error { return errors.New("an answer") }); err == nil || errors.Is(err, ErrOpen) {
		t.Fatalf("an answer: %v; want it back, the breaker closed", err)
	}
	if err := b.Do(clock, failed, func() error { return boom }); err != boom {
		t.Fatalf("a failure: %v; want it back", err)
	}
	ran := false
	if err := b.Do(clock, failed, func() error { ran = true; return nil }); !errors.Is(err, ErrOpen) || ran {
		t.Fatalf("while open: %v, ran %v; want ErrOpen and f not run", err, ran)
	}
}
