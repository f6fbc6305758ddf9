// Package breaker is a circuit breaker for a remote service that may go
// away (a Ray head, a Slurm controller): after Threshold failures in a row
// it opens and refuses calls; after its reset timeout it lets one probe
// through (half-open); a probe that succeeds closes it, one that fails
// opens it again with the timeout doubled, up to MaxReset (reconnection
// with backoff).
//
// The breaker reads no clock of its own: every method takes the time, so
// tests drive it with a fake one.
package breaker

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// State is where a breaker stands.
type State string

const (
	// Closed: calls go through; failures are counted.
	Closed State = "closed"
	// Open: calls are refused until the reset timeout passes.
	Open State = "open"
	// HalfOpen: one probe call is let through; its outcome decides.
	HalfOpen State = "half-open"
)

// ErrOpen is what Allow answers while the breaker refuses calls.
var ErrOpen = errors.New("circuit breaker open")

// Config sets a breaker's thresholds. Zero values take the defaults.
type Config struct {
	// Threshold is how many failures in a row open the breaker. Default 3.
	Threshold int
	// Reset is how long the breaker stays open before its first probe.
	// Default 5s.
	Reset time.Duration
	// MaxReset caps the doubling of Reset after failed probes. Default 1m.
	MaxReset time.Duration
}

// Snapshot is a breaker's state, for status pages.
type Snapshot struct {
	State    State
	Failures int       // failures in a row
	LastErr  string    // the last failure, "" when none since the last success
	Since    time.Time // when State was entered
	RetryAt  time.Time // Open: when the next probe may go
}

// Breaker is safe for concurrent use.
type Breaker struct {
	cfg Config

	mu       sync.Mutex
	state    State
	failures int
	lastErr  string
	since    time.Time
	wait     time.Duration // the current reset timeout
	retryAt  time.Time
	probing  bool // half-open: the probe is out
}

// New returns a closed breaker.
func New(cfg Config) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = 3
	}
	if cfg.Reset <= 0 {
		cfg.Reset = 5 * time.Second
	}
	if cfg.MaxReset < cfg.Reset {
		cfg.MaxReset = max(time.Minute, cfg.Reset)
	}
	return &Breaker{cfg: cfg, state: Closed, wait: cfg.Reset}
}

// Do runs f through the breaker: refused at once (an error wrapping
// ErrOpen) while it may not go; else f's error is reported as a Failure
// when failed says it is one and as a Success otherwise, each at now().
func (b *Breaker) Do(now func() time.Time, failed func(error) bool, f func() error) error {
	if err := b.Allow(now()); err != nil {
		return err
	}
	err := f()
	if failed(err) {
		b.Failure(now(), err)
	} else {
		b.Success(now())
	}
	return err
}

// Allow says whether a call may go now: nil while closed, and for the one
// probe once the open breaker's timeout has passed (it turns half-open);
// otherwise an error wrapping ErrOpen. A caller that was allowed reports
// the outcome with Success or Failure.
func (b *Breaker) Allow(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return nil
	case Open:
		if now.Before(b.retryAt) {
			return fmt.Errorf("%w: retrying in %s (last error: %s)", ErrOpen, b.retryAt.Sub(now).Round(time.Millisecond), b.lastErr)
		}
		b.state, b.since, b.probing = HalfOpen, now, true
		return nil
	default: // HalfOpen
		if b.probing {
			return fmt.Errorf("%w: a probe is under way (last error: %s)", ErrOpen, b.lastErr)
		}
		b.probing = true
		return nil
	}
}

// Success records a call that worked: the breaker closes and its backoff
// starts over.
func (b *Breaker) Success(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Closed {
		b.since = now
	}
	b.state, b.failures, b.lastErr, b.wait, b.probing = Closed, 0, "", b.cfg.Reset, false
}

// Failure records a call that failed. Closed, the breaker opens at the
// threshold; a failed probe opens it again for twice as long (up to
// MaxReset).
func (b *Breaker) Failure(now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if err != nil {
		b.lastErr = err.Error()
	}
	switch b.state {
	case Closed:
		if b.failures < b.cfg.Threshold {
			return
		}
	case HalfOpen:
		b.wait = min(2*b.wait, b.cfg.MaxReset)
	case Open:
		return
	}
	b.state, b.since, b.retryAt, b.probing = Open, now, now.Add(b.wait), false
}

// Snapshot returns the breaker's state.
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{State: b.state, Failures: b.failures, LastErr: b.lastErr, Since: b.since}
	if b.state == Open {
		s.RetryAt = b.retryAt
	}
	return s
}
